//! One service instance behind one API, whichever backend runs it: a local
//! process ([`Local`]), a service another process started and shares
//! ([`External`]), or, with the `docker` feature, a container.

use std::path::Path;
use std::time::Duration;

use crate::process::Local;
use crate::{Error, Result};

/// A local process or a container behind one service's API.
// One per service instance: a few hundred bytes either way do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Runner {
    Local(Local),
    External(External),
    #[cfg(feature = "docker")]
    Docker(crate::docker::Handle),
}

/// A service started by another process (`pgcdc-services`) and named by an
/// environment variable, so that a run of many test binaries starts each
/// JVM once instead of once per binary. Tests can use it, not stop it.
#[derive(Debug)]
pub(crate) struct External {
    pub service: &'static str,
    pub variable: &'static str,
}

impl External {
    fn refuse(&self, action: &'static str) -> Error {
        Error::External {
            service: self.service,
            variable: self.variable,
            action,
        }
    }
}

impl Runner {
    /// Starts the service (no-op when running) and waits until `probe` passes.
    pub fn start(
        &self,
        timeout: Duration,
        probe: impl FnMut() -> Result<(), String>,
    ) -> Result<()> {
        match self {
            Self::Local(local) => local.start(timeout, probe),
            Self::External(external) => {
                let mut probe = probe;
                probe().map_err(|_| external.refuse("started"))
            }
            #[cfg(feature = "docker")]
            Self::Docker(handle) => handle.start(timeout, probe),
        }
    }

    /// Sends `signal` (`TERM`, `INT`, `QUIT`, `KILL`) and waits for the exit.
    pub fn stop(&self, signal: &str, timeout: Duration) -> Result<()> {
        match self {
            Self::Local(local) => local.stop(signal, timeout),
            Self::External(external) => Err(external.refuse("stopped")),
            #[cfg(feature = "docker")]
            Self::Docker(handle) => handle.stop(signal == "KILL" || signal == "QUIT"),
        }
    }

    /// The service's pid while a local process runs it.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Self::Local(local) => local.pid(),
            Self::External(_) => None,
            #[cfg(feature = "docker")]
            Self::Docker(_) => None,
        }
    }

    /// The log file of a local service.
    pub fn log(&self) -> Option<&Path> {
        match self {
            Self::Local(local) => Some(&local.launch.log),
            Self::External(_) => None,
            #[cfg(feature = "docker")]
            Self::Docker(_) => None,
        }
    }
}
