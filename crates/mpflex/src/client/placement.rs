//! Which server of a pool holds the session, shared by the session's paths.
//!
//! Behind a balancer every path connection of a session must reach the same server. The
//! first path of a session names no server in its routing preamble ([`Route::Any`]); the
//! balancer picks one, and that server's join answer names its id, which every later path
//! connection names. While the server is unknown one path dials and the others wait for
//! its answer, at most [`FIRST_WAIT`] (a first path over a dark link must not hold the
//! others back for its whole connect timeout). Paths that stop waiting dial "any" too;
//! one that lands on another server than the first answer named is dropped
//! ([`Placement::joined`]) and re-dials that server, so a session never spans two.
//!
//! A server that is gone (crashed, or its balancer route is down) shows as refusals: the
//! connection is refused, or closed before the handshake is answered. When no path of the
//! session is up and [`REFUSALS_TO_MOVE`] dials in a row were refused, the session forgets
//! its server: the next path dials any server, lands on a live one, and that server's
//! fresh session resets the streams that were open (the client learns it from `fresh`,
//! [`mpflex_engine::Session::joined`]). A dial that merely times out (a dark link) counts
//! for nothing: that says nothing about the server. A server that is drained says so
//! ([`mpflex_wire::CloseCode::Draining`]) and the session moves at once ([`Placement::forget`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mpflex_engine::join::ServerInfo;
use mpflex_wire::Route;
use tokio::sync::OwnedMutexGuard;

/// Refused dials in a row, with no path up, after which the session moves to another
/// server. Two: one refusal can be a server restarting its listener; the paths re-dial
/// within a few hundred milliseconds, so two cost little time.
pub const REFUSALS_TO_MOVE: u32 = 2;

/// How long a path waits for another path's first join before it dials "any" itself:
/// about three round trips (connect, handshake, join) of a slow link.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct Placement {
    state: Mutex<State>,
    /// Held by the one path that dials while the server is unknown.
    first: Arc<tokio::sync::Mutex<()>>,
    /// Index, in a path's list of server addresses, of the last one that answered: the
    /// next dial starts there, so a dead first address does not cost every dial a timeout.
    endpoint: AtomicUsize,
}

#[derive(Default)]
struct State {
    server: Option<ServerInfo>,
    refusals: u32,
}

/// What one dial goes out with.
pub struct Ticket {
    pub route: Route,
    /// Where the server asked later paths to join it directly.
    pub join: Option<std::net::SocketAddr>,
    /// Held while the server is unknown.
    _first: Option<OwnedMutexGuard<()>>,
}

impl Placement {
    /// The route for the next dial. While the server is unknown this waits (at most
    /// [`FIRST_WAIT`]) for another path's dial to finish, and the ticket holds the others
    /// back until this one is done.
    pub async fn ticket(&self) -> Ticket {
        if let Some(s) = self.server() {
            return Ticket::to(s);
        }
        let guard = tokio::time::timeout(FIRST_WAIT, self.first.clone().lock_owned())
            .await
            .ok();
        match self.server() {
            // Another path found the server meanwhile.
            Some(s) => Ticket::to(s),
            None => Ticket {
                route: Route::Any,
                join: None,
                _first: guard,
            },
        }
    }

    pub fn server(&self) -> Option<ServerInfo> {
        self.state.lock().unwrap().server
    }

    /// A dial with `route` joined `server`. False if the session has meanwhile moved to
    /// another server (this connection must not carry it).
    pub fn joined(&self, route: Route, server: ServerInfo) -> bool {
        let mut st = self.state.lock().unwrap();
        st.refusals = 0;
        match (route, st.server) {
            (Route::Any, None) => {
                st.server = Some(server);
                true
            }
            (_, Some(s)) => s.id == server.id,
            // Routed to a server the session has since forgotten.
            (Route::Server(_), None) => false,
        }
    }

    /// A dial was refused (see the module doc); `any_path_up`: whether the session still
    /// has a path. Returns the server forgotten, if this refusal moved the session.
    pub fn refused(&self, any_path_up: bool) -> Option<ServerInfo> {
        let mut st = self.state.lock().unwrap();
        st.refusals += 1;
        if any_path_up || st.refusals < REFUSALS_TO_MOVE {
            return None;
        }
        st.refusals = 0;
        st.server.take()
    }

    /// The server said it is going away: the next dial goes to any server.
    pub fn forget(&self) {
        let mut st = self.state.lock().unwrap();
        st.server = None;
        st.refusals = 0;
    }

    pub fn endpoint(&self) -> usize {
        self.endpoint.load(Ordering::Relaxed)
    }

    pub fn set_endpoint(&self, i: usize) {
        self.endpoint.store(i, Ordering::Relaxed)
    }
}

impl Ticket {
    fn to(s: ServerInfo) -> Ticket {
        Ticket {
            route: Route::from_id(s.id),
            join: s.join,
            _first: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srv(id: u16) -> ServerInfo {
        ServerInfo { id, join: None }
    }

    #[tokio::test]
    async fn the_first_join_places_the_session_and_later_paths_follow() {
        let p = Arc::new(Placement::default());
        let t = p.ticket().await;
        assert_eq!(t.route, Route::Any);
        // A second path waits while the first dials.
        let p2 = p.clone();
        let second = tokio::spawn(async move { p2.ticket().await.route });
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        assert!(p.joined(t.route, srv(3)));
        drop(t);
        assert_eq!(second.await.unwrap(), Route::from_id(3));
    }

    #[tokio::test]
    async fn a_path_waits_for_a_slow_first_join_only_so_long_and_a_second_server_is_refused() {
        let p = Arc::new(Placement::default());
        let slow = p.ticket().await;
        let started = std::time::Instant::now();
        let t = p.ticket().await;
        assert_eq!(t.route, Route::Any);
        assert!(started.elapsed() >= FIRST_WAIT);
        // The second path's join answers first: its server is the session's.
        assert!(p.joined(t.route, srv(2)));
        // The slow one landed elsewhere: it must not carry the session.
        assert!(!p.joined(slow.route, srv(3)));
        assert_eq!(p.ticket().await.route, Route::from_id(2));
    }

    #[tokio::test]
    async fn refusals_move_the_session_only_when_no_path_is_up() {
        let p = Placement::default();
        let t = p.ticket().await;
        assert!(p.joined(t.route, srv(2)));
        drop(t);
        assert_eq!(p.refused(true), None);
        assert_eq!(p.refused(true), None);
        assert_eq!(p.refused(true), None, "a path is still up: the server lives");
        assert_eq!(p.refused(false), Some(srv(2)));
        assert_eq!(p.ticket().await.route, Route::Any);
        // One refusal alone moves nothing; a join in between starts the count again.
        let t = p.ticket().await;
        assert!(p.joined(t.route, srv(1)));
        drop(t);
        assert_eq!(p.refused(false), None);
        assert!(p.joined(Route::from_id(1), srv(1)));
        assert_eq!(p.refused(false), None);
        assert_eq!(p.refused(false), Some(srv(1)));
    }

    #[tokio::test]
    async fn a_dial_to_a_forgotten_server_does_not_join() {
        let p = Placement::default();
        let t = p.ticket().await;
        assert!(p.joined(t.route, srv(1)));
        drop(t);
        let late = p.ticket().await;
        assert_eq!(late.route, Route::from_id(1));
        p.forget();
        assert!(!p.joined(late.route, srv(1)), "the session moved meanwhile");
        let t = p.ticket().await;
        assert!(p.joined(t.route, srv(2)));
        assert!(
            !p.joined(Route::from_id(1), srv(1)),
            "a path still dialling the old server"
        );
    }
}
