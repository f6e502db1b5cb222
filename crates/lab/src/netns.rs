//! The lab's namespaces: [`Topology::create`] builds client, emulator and server
//! namespaces joined by emulated veth paths (see `mpflex_netns`, the harness the lab and
//! the end-to-end tests share).

pub use mpflex_netns::*;
