//! Everything that talks to the kernel with `unsafe`: sockets, rings, BPF, namespaces, CPU
//! affinity, clock reads. Nothing outside this module uses `unsafe`; every block here carries a `// SAFETY:`.
pub mod af_packet;
pub mod af_xdp;
pub mod bpf;
pub mod btf;
pub mod capture;
pub mod cpu;
pub mod ifinfo;
pub mod link;
pub mod netns;
pub mod prefetch;
pub mod socket;
pub mod stalls;
pub mod time;
pub mod tracefs;
pub mod wake;
pub mod wire;
pub mod wire_clock;
pub mod xdp_redirect;
pub mod zeroed;
