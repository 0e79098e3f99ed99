//! The one mapping from engine errors to the exception classes of `netrig.errors` (defined there,
//! in Python; see its table). Nothing else in this crate raises a `netrig.errors` class.
use pyo3::PyErr;

pyo3::import_exception!(netrig.errors, ConfigError);
pyo3::import_exception!(netrig.errors, CapabilityError);
pyo3::import_exception!(netrig.errors, PortError);
pyo3::import_exception!(netrig.errors, InterfaceError);
pyo3::import_exception!(netrig.errors, PermissionError_);
pyo3::import_exception!(netrig.errors, LiveInterfaceError);
pyo3::import_exception!(netrig.errors, EngineError);
pyo3::import_exception!(netrig.errors, InterruptedTrial);

/// An engine error on its way to Python: `?` converts engine errors into it, and it converts
/// into the `PyErr` of exactly one `netrig.errors` class.
#[derive(Debug)]
pub struct Error(pub netrig_engine::EngineError);

pub type Result<T> = std::result::Result<T, Error>;

impl From<netrig_engine::EngineError> for Error {
    fn from(e: netrig_engine::EngineError) -> Self {
        Error(e)
    }
}

impl From<netrig_engine::ConfigError> for Error {
    fn from(e: netrig_engine::ConfigError) -> Self {
        Error(e.into())
    }
}

impl From<netrig_engine::PortError> for Error {
    fn from(e: netrig_engine::PortError) -> Self {
        Error(e.into())
    }
}

impl From<Error> for PyErr {
    fn from(Error(e): Error) -> PyErr {
        let text = e.to_string();
        match e {
            netrig_engine::EngineError::Config(c) => ConfigError::new_err((c.field, c.message)),
            netrig_engine::EngineError::Port(p) => match p {
                netrig_engine::PortError::NoSuchInterface { .. } => InterfaceError::new_err(text),
                // A namespace that does not exist is where the interface was looked up.
                netrig_engine::PortError::Netns { .. } => InterfaceError::new_err(text),
                netrig_engine::PortError::PermissionDenied { .. } => PermissionError_::new_err(text),
                netrig_engine::PortError::Unsupported { .. } => CapabilityError::new_err(text),
                netrig_engine::PortError::Live { .. } => LiveInterfaceError::new_err(text),
                netrig_engine::PortError::Io { .. }
                | netrig_engine::PortError::NoSuchQueue { .. }
                | netrig_engine::PortError::Busy { .. }
                | netrig_engine::PortError::Other { .. } => PortError::new_err(text),
            },
            netrig_engine::EngineError::Worker { .. } => EngineError::new_err(text),
            netrig_engine::EngineError::Interrupted => InterruptedTrial::new_err(text),
            netrig_engine::EngineError::Capability { .. } => CapabilityError::new_err(text),
        }
    }
}

impl Error {
    /// The same error, a configuration error now about `field` (e.g. an item's error about its list).
    pub fn about(self, field: &str) -> Error {
        match self.0 {
            netrig_engine::EngineError::Config(c) => config(field, c.message),
            e => Error(e),
        }
    }
}

/// A configuration error of `field` (the Python argument's name).
pub fn config(field: impl Into<String>, message: impl Into<String>) -> Error {
    netrig_engine::ConfigError::new(field, message).into()
}
