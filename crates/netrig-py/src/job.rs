//! An engine run in its own thread, watched from Python: `wait` with the GIL released, `stop`,
//! and the outcome kept once the thread has ended. Trials and listens are jobs.
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use netrig_engine::run::trial::TrialControl;
use netrig_engine::EngineError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::errors;

type Outcome<T> = std::result::Result<T, EngineError>;

pub struct Job<T> {
    pub ctl: Arc<TrialControl>,
    name: &'static str,
    thread: Mutex<Option<JoinHandle<Outcome<T>>>>,
    outcome: Mutex<Option<Outcome<T>>>,
}

impl<T: Send + 'static> Job<T> {
    /// Start `run` in a thread called `netrig-<name>`.
    pub fn spawn(
        name: &'static str,
        ctl: Arc<TrialControl>,
        run: impl FnOnce() -> Outcome<T> + Send + 'static,
    ) -> std::result::Result<Self, EngineError> {
        let thread = std::thread::Builder::new()
            .name(format!("netrig-{name}"))
            .spawn(run)
            .map_err(|e| EngineError::Worker { name: name.into(), message: format!("cannot start: {e}") })?;
        Ok(Job { ctl, name, thread: Mutex::new(Some(thread)), outcome: Mutex::new(None) })
    }

    /// Wait up to `timeout_s` for the thread to end and keep its outcome (GIL released).
    pub fn wait_for(&self, py: Python<'_>, timeout_s: f64) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout_s);
        py.allow_threads(|| loop {
            {
                let mut t = self.thread.lock().unwrap_or_else(|e| e.into_inner());
                match t.take() {
                    None => return true,
                    Some(h) if h.is_finished() => {
                        let outcome = h.join().unwrap_or_else(|_| {
                            Err(EngineError::Worker {
                                name: self.name.into(),
                                message: "the engine thread panicked".into(),
                            })
                        });
                        *self.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
                        return true;
                    }
                    Some(h) => *t = Some(h),
                }
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        })
    }

    /// The outcome converted by `conv` (waits for the end, Ctrl-C raising); the engine's error
    /// raised again if it failed.
    pub fn result<R>(&self, py: Python<'_>, conv: impl FnOnce(&T) -> R) -> PyResult<R> {
        while !self.wait_for(py, 0.2) {
            py.check_signals()?;
        }
        let o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        match o.as_ref() {
            Some(Ok(r)) => Ok(conv(r)),
            Some(Err(e)) => Err(errors::Error(crate::clone_error(e)).into()),
            None => Err(PyRuntimeError::new_err(format!("the {} has no outcome", self.name))),
        }
    }
}
