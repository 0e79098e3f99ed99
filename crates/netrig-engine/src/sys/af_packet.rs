//! af_packet backend (being written).
use crate::error::PortError;
use crate::port::{Port, PortSpec};

/// Open `spec` with this backend.
pub fn open(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    Err(PortError::Unsupported { ifname: spec.ifname.clone(), backend: "af_packet".into(), reason: "not built yet".into() })
}
