//! Typed identities the wire carries as one byte: a path's tier and the reason codes of
//! `Reset`, `Close` and `FlowClose`. Each is defined once, here, with its number pinned:
//! a peer reads the numbers, so each stays what it is, and a number is never reused. A
//! decoder turns a number no variant has into [`WireError::UnknownId`], never into a
//! nearby variant.

use std::fmt;
use std::str::FromStr;

use crate::WireError;

/// Defines a `#[repr(u8)]` identity: its variants with their wire numbers and names,
/// `ALL` in wire-number order, `name`, `wire`, `from_wire` and `Display`.
macro_rules! wire_id {
    (
        $(#[$m:meta])*
        pub enum $ty:ident ($what:literal) {
            $( $(#[$vm:meta])* $v:ident = $n:literal => $name:literal, )+
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum $ty {
            $( $(#[$vm])* $v = $n, )+
        }

        impl $ty {
            /// Every variant, in wire-number order.
            pub const ALL: &'static [$ty] = &[$($ty::$v),+];

            /// Its name in configuration, status and logs.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$v => $name,)+
                }
            }

            /// Its number on the wire.
            pub fn wire(self) -> u8 {
                self as u8
            }

            /// The variant of a wire number; a number none has is a protocol error.
            pub fn from_wire(n: u8) -> Result<$ty, WireError> {
                match n {
                    $($n => Ok($ty::$v),)+
                    value => Err(WireError::UnknownId { what: $what, value }),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_id! {
    /// A path's tier (`priority`): lower tiers carry data only while every higher tier is
    /// down or degraded (the active-standby modes of 3GPP ATSSS and of bonding products;
    /// MPTCP's MP_PRIO tells the peer of a backup subflow the same way). Ordered from the
    /// highest tier: a larger number is a lower tier. The client announces each path's
    /// tier to the server in a `Tier` frame.
    pub enum Tier("tier") {
        /// Carries data whenever it can.
        Primary = 0 => "primary",
        /// Carries data only while no primary path can.
        Secondary = 1 => "secondary",
        /// Carries data only while no primary or secondary path can.
        Backup = 2 => "backup",
        /// A path the energy-aware mode holds back (a cellular link while WiFi suffices):
        /// below every configured tier, so it still takes over when nothing else can carry.
        EnergyStandby = 3 => "energy standby",
        /// Carries no data at all (a data cap reached with `at_cap = "off"`): it stays
        /// connected for control frames, so lifting the cap needs no handshake.
        Off = 4 => "off",
    }
}

/// Other names accepted for a tier (a name with a space is awkward in configuration).
const TIER_ALIASES: &[(&str, Tier)] = &[("energy-standby", Tier::EnergyStandby)];

impl Tier {
    /// The tiers a path's configuration (`priority`) and a policy rule (`tiers`) may
    /// name; the others are set by the engine's energy-aware mode and by data caps.
    pub const CONFIGURED: [Tier; 3] = [Tier::Primary, Tier::Secondary, Tier::Backup];

    /// Whether configuration may name it ([`Tier::CONFIGURED`]).
    pub fn is_configured(self) -> bool {
        self <= Tier::Backup
    }

    /// Every name [`FromStr`] accepts: each tier's name, then the aliases.
    pub fn accepted_names() -> impl Iterator<Item = &'static str> {
        Tier::ALL
            .iter()
            .map(|t| t.name())
            .chain(TIER_ALIASES.iter().map(|(n, _)| *n))
    }
}

/// A tier name that is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier {0:?}")]
pub struct UnknownTier(pub String);

impl FromStr for Tier {
    type Err = UnknownTier;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tier::ALL
            .iter()
            .copied()
            .find(|t| t.name() == s)
            .or_else(|| TIER_ALIASES.iter().find(|(n, _)| *n == s).map(|(_, t)| *t))
            .ok_or_else(|| UnknownTier(s.to_string()))
    }
}

wire_id! {
    /// Why a stream was reset: the `code` of a `Reset` frame (and of the local
    /// stream-reset events a driver sees).
    pub enum ResetCode("reset code") {
        /// The application's connection failed or was closed with an error.
        App = 1 => "app",
        /// The server refused the destination (its policy).
        Refused = 2 => "refused",
        /// The destination could not be reached (no address, connection refused, timeout).
        Unreachable = 3 => "unreachable",
        /// The session is going away (shutdown, or it expired).
        SessionGone = 4 => "session gone",
        /// The server refused the stream at one of its limits (streams or descriptors of
        /// the session or the client key, name lookups in progress), or it ran out of
        /// descriptors.
        Limit = 5 => "limit",
        /// Never sent: the client learnt that the server lost the session (it restarted),
        /// so every stream of it is gone. A peer that sends it is in error.
        PeerLostState = 0xfe => "peer lost state",
    }
}

impl ResetCode {
    /// Whether a `Reset` frame may carry it ([`ResetCode::PeerLostState`] is local).
    pub fn on_wire(self) -> bool {
        self != ResetCode::PeerLostState
    }
}

wire_id! {
    /// The `code` of a `FlowClose` frame.
    pub enum FlowCloseCode("flow close code") {
        /// The application's side ended the flow (its association closed).
        Normal = 0 => "normal",
        /// No datagram either way for the flow's idle timeout.
        Idle = 1 => "idle",
        /// The server refused the destination (its policy).
        Refused = 2 => "refused",
        /// The destination could not be reached (no address, no socket).
        Unreachable = 3 => "unreachable",
        /// The receiver holds too many flows already.
        TooMany = 4 => "too many",
    }
}

wire_id! {
    /// The `code` of a `Close` frame.
    pub enum CloseCode("close code") {
        /// An orderly end (shutdown of either side).
        Normal = 0 => "normal",
        /// A server of a pool is going away (drained): the client starts a new session,
        /// through the balancer, on another server.
        Draining = 1 => "draining",
        /// (answering a join) The server refused the session or the path at its limits:
        /// the client key holds as many sessions, or descriptors, as the server allows.
        Limit = 2 => "limit",
        /// The peer acknowledged nothing for too long while data waited for it (the
        /// sender's `ack_timeout`): the memory it held is released.
        NoProgress = 3 => "no-progress",
    }
}

/// Why a destination could not be had, for a stream's `Reset` or a flow's `FlowClose`
/// alike (the server answers both the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The server's policy refused it.
    Refused,
    /// It could not be reached.
    Unreachable,
    /// The server's limits (or its descriptors) leave no room for it: a stream is reset
    /// with [`ResetCode::Limit`], a flow closed with [`FlowCloseCode::TooMany`].
    Limit,
}

impl From<Refusal> for ResetCode {
    fn from(r: Refusal) -> ResetCode {
        match r {
            Refusal::Refused => ResetCode::Refused,
            Refusal::Unreachable => ResetCode::Unreachable,
            Refusal::Limit => ResetCode::Limit,
        }
    }
}

impl From<Refusal> for FlowCloseCode {
    fn from(r: Refusal) -> FlowCloseCode {
        match r {
            Refusal::Refused => FlowCloseCode::Refused,
            Refusal::Unreachable => FlowCloseCode::Unreachable,
            Refusal::Limit => FlowCloseCode::TooMany,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire numbers, pinned: each is what peers already running read it as.
    #[test]
    fn wire_numbers_are_pinned() {
        let tiers = [
            ("primary", 0),
            ("secondary", 1),
            ("backup", 2),
            ("energy standby", 3),
            ("off", 4),
        ];
        assert_eq!(tiers.len(), Tier::ALL.len(), "a tier without a pinned number");
        for (name, n) in tiers {
            let t: Tier = name.parse().unwrap();
            assert_eq!((t.wire(), t.name()), (n, name));
            assert_eq!(Tier::from_wire(n), Ok(t));
        }
        let resets = [
            ("app", 1),
            ("refused", 2),
            ("unreachable", 3),
            ("session gone", 4),
            ("limit", 5),
            ("peer lost state", 0xfe),
        ];
        assert_eq!(resets.len(), ResetCode::ALL.len());
        for (c, (name, n)) in ResetCode::ALL.iter().zip(resets) {
            assert_eq!((c.wire(), c.name()), (n, name));
            assert_eq!(ResetCode::from_wire(n), Ok(*c));
        }
        let flows = [
            ("normal", 0),
            ("idle", 1),
            ("refused", 2),
            ("unreachable", 3),
            ("too many", 4),
        ];
        assert_eq!(flows.len(), FlowCloseCode::ALL.len());
        for (c, (name, n)) in FlowCloseCode::ALL.iter().zip(flows) {
            assert_eq!((c.wire(), c.name()), (n, name));
        }
        let closes = [("normal", 0), ("draining", 1), ("limit", 2), ("no-progress", 3)];
        assert_eq!(closes.len(), CloseCode::ALL.len());
        for (c, (name, n)) in CloseCode::ALL.iter().zip(closes) {
            assert_eq!((c.wire(), c.name()), (n, name));
        }
    }

    /// A number no variant has is an error naming what it should have been, never a
    /// clamp to the nearest variant.
    #[test]
    fn unknown_numbers_are_protocol_errors() {
        assert_eq!(Tier::from_wire(5), Err(WireError::UnknownId { what: "tier", value: 5 }));
        assert_eq!(Tier::from_wire(255).unwrap_err().to_string(), "unknown tier number 255");
        assert!(ResetCode::from_wire(0).is_err());
        assert!(ResetCode::from_wire(6).is_err());
        assert!(FlowCloseCode::from_wire(5).is_err());
        assert!(CloseCode::from_wire(4).is_err());
    }

    /// Every accepted tier name, aliases included, parses to a tier that shows a name
    /// which parses back to it; configuration may name the first three only.
    #[test]
    fn every_accepted_tier_name_round_trips() {
        for name in Tier::accepted_names() {
            let t: Tier = name.parse().unwrap();
            assert_eq!(t.name().parse::<Tier>(), Ok(t), "{name}");
        }
        assert_eq!("energy-standby".parse(), Ok(Tier::EnergyStandby));
        assert_eq!("bakup".parse::<Tier>(), Err(UnknownTier("bakup".into())));
        let configured: Vec<Tier> = Tier::ALL.iter().copied().filter(|t| t.is_configured()).collect();
        assert_eq!(configured, Tier::CONFIGURED);
        assert!(
            Tier::Primary < Tier::Backup && Tier::EnergyStandby < Tier::Off,
            "ordered highest first"
        );
    }
}
