//! Link discovery: which interfaces can carry a path now, from the kernel's rtnetlink
//! view, so that paths follow the links as they come and go (a tether plugged in, WiFi
//! joining or leaving) instead of a static list re-dialled with backoff.
//!
//! - [`pattern`]: interface-name patterns (`device = "wlan*"`, `exclude`);
//! - [`table`]: interfaces, addresses and routes, and whether one can carry a path;
//! - [`plan`]: the paths the configuration asks for against that table (pure);
//! - [`netlink`]: the rtnetlink watcher that keeps the table current;
//! - [`wifi`]: a WiFi path's signal from nl80211, a leading indicator of its failure.
//!
//! A link that goes down, loses its carrier or its address is a dead path at once: the
//! kernel tells us, so there is nothing to wait for — no keepalive or TCP timer (MPTCP-MA's
//! point, Lim, ch. 2: act on the link layer's signal instead of transport timeouts).

pub mod netlink;
pub mod pattern;
pub mod plan;
pub mod table;
pub mod wifi;
