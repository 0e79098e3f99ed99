//! Opening a port by spec: the explicit backend, or `auto` (probe and pick the fastest that
//! works, saying why).
use crate::error::PortError;
use crate::port::{Backend, Port, PortSpec};
use crate::sys;

/// Open a port. With `spec.backend == None` tries AF_XDP, then AF_PACKET, then plain sockets,
/// and records in `caps().notes` what was tried and why the choice fell where it did.
pub fn open_port(spec: &PortSpec) -> Result<Box<dyn Port>, PortError> {
    match spec.backend {
        Some(Backend::AfXdp) => sys::af_xdp::open(spec),
        Some(Backend::AfPacket) => sys::af_packet::open(spec),
        Some(Backend::Socket) => sys::socket::open(spec),
        Some(Backend::Loopback) => Err(PortError::Unsupported {
            ifname: spec.ifname.clone(),
            backend: "loopback".into(),
            reason: "loopback ports are created in pairs with loopback::pair(), not opened by name".into(),
        }),
        None => {
            let mut tried = Vec::new();
            for b in [Backend::AfXdp, Backend::AfPacket, Backend::Socket] {
                let s = PortSpec { backend: Some(b), ..spec.clone() };
                match open_port(&s) {
                    Ok(p) => {
                        if !tried.is_empty() {
                            log_choice(&spec.ifname, b, &tried);
                        }
                        return Ok(p);
                    }
                    Err(
                        e @ (PortError::NoSuchInterface { .. }
                        | PortError::PermissionDenied { .. }
                        | PortError::Netns { .. }),
                    ) => return Err(e),
                    Err(e) => tried.push(format!("{b}: {e}")),
                }
            }
            Err(PortError::Other {
                ifname: spec.ifname.clone(),
                message: format!("no backend works: {}", tried.join("; ")),
            })
        }
    }
}

fn log_choice(ifname: &str, b: Backend, tried: &[String]) {
    // Auto-selection is reported through caps().notes by each backend; this keeps the reasons
    // for the rejected ones visible on stderr when NETRIG_DEBUG is set.
    if std::env::var_os("NETRIG_DEBUG").is_some() {
        eprintln!("netrig: {ifname}: auto chose {b} after: {}", tried.join("; "));
    }
}
