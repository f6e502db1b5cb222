//! The WiFi signal of a path's interface as a leading indicator (WearMan, seed 000
//! ch. VI: hand over *before* the link fails): while a path runs over a WiFi interface,
//! its access point's station info is read from nl80211 every `poll_ms`
//! (`NL80211_CMD_GET_STATION` dump on the interface: signal, its average, the beacons'
//! average, TX retries and failures, expected throughput, beacon losses), the
//! [`judge`] turns the signal series into weak and recovered, and the engine is told
//! ([`mpflex_engine::Session::set_link_hint`]): a weak path is degraded — it takes no new
//! data while another path can carry, and what it holds is copied elsewhere.
//!
//! - [`station`]: the dump's replies, reduced to what is read;
//! - [`judge`]: the thresholds, their hysteresis and the hold (pure).
//!
//! An interface is WiFi when sysfs says so (`/sys/class/net/IF/wireless` or `phy80211`)
//! or nl80211 knows it (`NL80211_CMD_GET_INTERFACE`). On a host without WiFi, or a kernel
//! without nl80211, nothing is read and the path is left to the transport's own
//! indicators: one debug line says so, never an error (most hosts have no WiFi).

pub mod judge;
pub mod station;

use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use mpflex_engine::LinkHint;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};
use wl_nl80211::{Nl80211Attr, Nl80211Handle};

use crate::config::WifiConfig;
use crate::driver::SessionHandle;
use crate::links::plan::{Slot, Target};

use judge::{Judge, Verdict};
use station::Station;

/// The longest a dump may take: the kernel answers from memory, within a millisecond.
const DUMP_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether sysfs marks `device` as WiFi (cfg80211 drivers: `phy80211`; the wireless
/// extensions: `wireless`).
fn sysfs_says_wireless(sys: &Path, device: &str) -> bool {
    let dir = sys.join(device);
    dir.join("phy80211").exists() || dir.join("wireless").exists()
}

/// The interface's index (`None`: no such interface now).
fn if_index(device: &str) -> Option<u32> {
    let name = std::ffi::CString::new(device).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string for the call's duration.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

/// An nl80211 connection (an error, with the reason, where the socket cannot be opened).
fn connect() -> Result<Nl80211Handle, String> {
    let (conn, handle, _) = wl_nl80211::new_connection().map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Whether nl80211 knows interface `index`: an answer to GET_INTERFACE. An error
/// (`ENODEV` for a non-WiFi interface, or no nl80211 family at all) is a no.
async fn nl80211_knows(handle: &Nl80211Handle, index: u32) -> Result<bool, String> {
    let req = handle
        .interface()
        .get(vec![Nl80211Attr::IfIndex(index)])
        .execute()
        .await;
    let got: Result<Vec<_>, _> = match tokio::time::timeout(DUMP_TIMEOUT, req.try_collect()).await {
        Ok(r) => r,
        Err(_) => return Err("no answer from nl80211".into()),
    };
    got.map(|v| !v.is_empty()).map_err(|e| e.to_string())
}

/// The station info of interface `index`'s access point (`Ok(None)`: not associated).
async fn read_station(handle: &Nl80211Handle, index: u32) -> Result<Option<Station>, String> {
    let req = handle.station().dump(index).execute().await;
    let got: Vec<_> = match tokio::time::timeout(DUMP_TIMEOUT, req.try_collect()).await {
        Ok(r) => r.map_err(|e| e.to_string())?,
        Err(_) => return Err("no answer from nl80211".into()),
    };
    Ok(station::pick(
        got.iter().filter_map(|m| Station::from_message(&m.payload)).collect(),
    ))
}

/// The nl80211 connection, opened on first use.
fn handle_of(handle: &mut Option<Nl80211Handle>) -> Result<Nl80211Handle, String> {
    if handle.is_none() {
        *handle = Some(connect()?);
    }
    Ok(handle.clone().expect("connected"))
}

/// Watches path `i`'s interface for as long as the client runs: while its target dials
/// over a WiFi interface, reads the signal and hints the engine. Returns when nothing
/// can be read on this host (no nl80211 socket), after one debug line.
pub async fn watch_path(
    h: SessionHandle,
    i: usize,
    mut target: watch::Receiver<Slot>,
    cfg: WifiConfig,
    shutdown: CancellationToken,
) {
    let mut handle: Option<Nl80211Handle> = None;
    loop {
        let slot = target.borrow_and_update().clone();
        let dialled = match (&slot.target, slot.device.as_deref()) {
            (Target::Dial(_), Some(d)) => if_index(d).map(|index| (d.to_string(), index)),
            _ => None,
        };
        if let Some((dev, index)) = dialled {
            let hd = match handle_of(&mut handle) {
                Ok(hd) => hd,
                Err(e) => {
                    debug!(path = %slot.name, "no nl80211 socket ({e}): the WiFi signal is not read");
                    return;
                }
            };
            let wireless = if sysfs_says_wireless(Path::new("/sys/class/net"), &dev) {
                Ok(true)
            } else {
                nl80211_knows(&hd, index).await
            };
            match wireless {
                Ok(true) => {
                    if !poll(&h, i, &slot.name, &dev, index, &hd, &cfg, &mut target, &shutdown).await {
                        return;
                    }
                    continue;
                }
                Ok(false) => debug!(path = %slot.name, device = %dev, "not a WiFi interface: its signal is not read"),
                Err(e) => debug!(
                    path = %slot.name,
                    device = %dev,
                    "not a WiFi interface to nl80211 ({e}): its signal is not read"
                ),
            }
        }
        tokio::select! {
            r = target.changed() => if r.is_err() { return },
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Reads the station of WiFi interface `index` every `poll_ms` until the path's target
/// changes (true) or the client stops (false); leaves the path without a hint.
#[allow(clippy::too_many_arguments)]
async fn poll(
    h: &SessionHandle,
    i: usize,
    name: &str,
    dev: &str,
    index: u32,
    handle: &Nl80211Handle,
    cfg: &WifiConfig,
    target: &mut watch::Receiver<Slot>,
    shutdown: &CancellationToken,
) -> bool {
    info!(path = %name, device = %dev, "WiFi interface: reading its signal every {:?}", cfg.poll());
    let mut judge = Judge::new(cfg.thresholds());
    let mut every = tokio::time::interval(cfg.poll());
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Only the first failure of a run of them is logged.
    let mut failing = false;
    let go_on = loop {
        tokio::select! {
            _ = every.tick() => {}
            r = target.changed() => break r.is_ok(),
            _ = shutdown.cancelled() => break false,
        }
        let station = match read_station(handle, index).await {
            Ok(s) => {
                failing = false;
                s
            }
            Err(e) => {
                if !failing {
                    debug!(path = %name, device = %dev, "cannot read the WiFi station: {e}");
                }
                failing = true;
                continue;
            }
        };
        take(h, i, name, dev, &mut judge, Instant::now(), station.as_ref());
    };
    if judge.weak() {
        h.set_link_hint(i, None);
    }
    h.set_wifi_signal(i, None);
    go_on
}

/// Takes one reading of path `i`'s station at `now`: the status shows its signal, and a
/// verdict of the judge goes to the engine.
fn take(
    h: &SessionHandle,
    i: usize,
    name: &str,
    dev: &str,
    judge: &mut Judge,
    now: Instant,
    station: Option<&Station>,
) {
    if let Some(s) = station {
        debug!(
            path = %name,
            device = %dev,
            signal = ?s.signal,
            signal_avg = ?s.signal_avg,
            tx_retries = ?s.tx_retries,
            tx_failed = ?s.tx_failed,
            expected_kbps = ?s.expected_throughput,
            beacon_loss = ?s.beacon_loss,
            "WiFi station"
        );
    }
    h.set_wifi_signal(i, station.and_then(Station::level));
    match judge.read(now, station) {
        Verdict::Unchanged => {}
        Verdict::Weak(why) => {
            info!(path = %name, device = %dev, "WiFi link weak ({why}): new data goes on the other paths");
            h.set_link_hint(i, Some(LinkHint::Weak));
        }
        Verdict::Recovered => {
            info!(path = %name, device = %dev, "WiFi signal recovered: the path takes new data again");
            h.set_link_hint(i, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_marks_wifi_interfaces() {
        let dir = std::env::temp_dir().join(format!("mpflex-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("wlan0/phy80211")).unwrap();
        std::fs::create_dir_all(dir.join("wlan1/wireless")).unwrap();
        std::fs::create_dir_all(dir.join("eth0")).unwrap();
        assert!(sysfs_says_wireless(&dir, "wlan0"));
        assert!(sysfs_says_wireless(&dir, "wlan1"));
        assert!(!sysfs_says_wireless(&dir, "eth0"));
        assert!(!sysfs_says_wireless(&dir, "usb0"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// On this host: loopback is no WiFi interface to nl80211, whether or not the kernel
    /// has nl80211 (no family: an error, which is a no as well). Nothing leaves the host.
    #[tokio::test]
    async fn loopback_is_not_wifi() {
        assert!(!sysfs_says_wireless(Path::new("/sys/class/net"), "lo"));
        let index = if_index("lo").expect("lo");
        if let Ok(h) = connect() {
            assert!(!nl80211_knows(&h, index).await.unwrap_or(false));
            // A station dump of a non-WiFi interface is an error or nothing, never a station.
            assert_eq!(read_station(&h, index).await.ok().flatten(), None);
        }
        assert_eq!(if_index("no-such-if0"), None);
    }

    /// Readings taken on a WiFi path reach the engine and the status: a weak signal
    /// degrades the path (another path carries), a recovered one releases it.
    #[tokio::test]
    async fn readings_hint_the_engine_and_show_in_the_status() {
        use mpflex_engine::{EngineConfig, PathState, Role, Session};

        let mut cfg = EngineConfig::new(Role::Client);
        cfg.link_hint_hold = Duration::ZERO;
        let sched = mpflex_sched::by_name("minrtt").unwrap();
        let sess = Session::new(cfg, sched, Instant::now());
        let h = SessionHandle::new(sess, vec!["wifi".into(), "lte".into()], None);
        h.with(|sh| {
            sh.sess.path_up(0, Instant::now());
            sh.sess.path_up(1, Instant::now());
        });
        let mut judge = Judge::new(WifiConfig::default().thresholds());
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let station = |dbm: i8| Station {
            signal_avg: Some(dbm),
            ..Station::default()
        };
        for (k, dbm) in [(0, -78), (1, -79)] {
            take(&h, 0, "wifi", "wlan0", &mut judge, at(k), Some(&station(dbm)));
        }
        assert!(h.with(|sh| sh.sess.path_hinted_weak(0)));
        assert_eq!(h.with(|sh| sh.sess.path_state(0)), PathState::Degraded);
        assert_eq!(h.with(|sh| sh.sess.path_state(1)), PathState::Active);
        assert_eq!(h.snapshot().paths[0].wifi_signal_dbm, Some(-79));
        assert!(h.snapshot().paths[0].link_weak);
        // Weak at 1 s: held until 6 s although the signal is good from 2 s.
        for k in 2..6 {
            take(&h, 0, "wifi", "wlan0", &mut judge, at(k), Some(&station(-65)));
            assert!(h.with(|sh| sh.sess.path_hinted_weak(0)), "held at {k} s");
        }
        take(&h, 0, "wifi", "wlan0", &mut judge, at(6), Some(&station(-64)));
        assert!(!h.with(|sh| sh.sess.path_hinted_weak(0)));
        assert_eq!(h.with(|sh| sh.sess.path_state(0)), PathState::Active);
        take(&h, 0, "wifi", "wlan0", &mut judge, at(7), None);
        assert_eq!(
            h.snapshot().paths[0].wifi_signal_dbm,
            None,
            "not associated: no reading"
        );
    }

    /// A path over a non-WiFi interface (loopback here): the watcher reads nothing, hints
    /// nothing and waits for the path's next target; it ends with the path.
    #[tokio::test]
    async fn a_path_over_a_wired_interface_is_left_alone() {
        use crate::links::table::Binding;
        use mpflex_engine::{EngineConfig, Role, Session};

        let sched = mpflex_sched::by_name("minrtt").unwrap();
        let sess = Session::new(EngineConfig::new(Role::Client), sched, Instant::now());
        let h = SessionHandle::new(sess, vec!["lo".into()], None);
        h.with(|sh| sh.sess.path_up(0, Instant::now()));
        let slot = Slot {
            rule: 0,
            device: Some("lo".into()),
            name: "lo".into(),
            target: Target::Dial(Binding {
                device: Some("lo".into()),
                source: None,
            }),
        };
        let (tx, rx) = watch::channel(slot);
        let task = tokio::spawn(watch_path(
            h.clone(),
            0,
            rx,
            WifiConfig::default(),
            CancellationToken::new(),
        ));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!task.is_finished(), "waits for the next target");
        assert!(!h.with(|sh| sh.sess.path_hinted_weak(0)));
        assert_eq!(h.with(|sh| sh.paths[0].wifi_signal), None);
        drop(tx);
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .unwrap()
            .unwrap();
    }
}
