//! mpflex: the client and server around the sans-IO session engine.

pub mod acl;
pub mod classes;
pub mod client;
pub mod config;
pub mod crypto;
pub mod driver;
pub mod energy;
pub mod gate;
pub mod links;
pub mod listen;
pub mod owner;
pub mod pathconn;
pub mod policy;
pub mod quota;
pub mod redirect;
pub mod runtime;
pub mod server;
pub mod socks;
pub mod status;
pub mod store;
pub mod tcpinfo;
pub mod tproxy;
pub mod tun;
