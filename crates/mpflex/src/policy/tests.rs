use super::*;
use mpflex_wire::TargetAddr;

fn rules(toml_text: &str) -> Result<Policy, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        rules: Vec<RuleConfig>,
    }
    let d: Doc = toml::from_str(toml_text).map_err(|e| e.to_string())?;
    let names = ["wifi".to_string(), "lte".to_string()];
    Policy::new(&d.rules, Some(&names)).map_err(|e| e.to_string())
}

fn to(t: &TargetAddr) -> Facts<'_> {
    Facts {
        dest: Destination::of(t),
        ..Default::default()
    }
}

fn ip(s: &str) -> TargetAddr {
    TargetAddr::Ip(s.parse().unwrap())
}

const PATHS: &[(&str, Tier)] = &[("wifi", Tier::Primary), ("lte", Tier::Backup)];

fn paths() -> Vec<(String, Tier)> {
    PATHS.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

#[test]
fn every_match_kind_selects_its_rule_and_first_match_wins() {
    let p = rules(
        r#"
        [[rules]]
        name = "voip"
        ports = ["5060-5061"]
        paths = ["wifi"]
        [[rules]]
        name = "lan"
        cidrs = ["10.0.0.0/8"]
        paths = ["lte"]
        [[rules]]
        name = "video"
        hosts = ["video.test"]
        tiers = ["backup"]
        [[rules]]
        name = "alice"
        uids = [1000]
        paths = ["lte"]
        [[rules]]
        name = "staff"
        gids = [50]
        paths = ["wifi"]
        [[rules]]
        name = "updates"
        cgroups = ["/system.slice/apt.service"]
        paths = ["wifi"]
        [[rules]]
        name = "bob"
        users = ["bob"]
        scheduler = "ecf"
        [[rules]]
        name = "bulk"
        traffic = ["bulk"]
        redundant = false
        [[rules]]
        name = "tproxy"
        listeners = ["transparent"]
        redundant = true
        energy = "aware"
        "#,
    )
    .unwrap();
    let rule = |f: &Facts<'_>| p.decide(f).rule;
    let sip = ip("192.0.2.1:5061");
    assert_eq!(rule(&to(&sip)).as_deref(), Some("voip"));
    // 10/8 on port 5060: the earlier rule wins.
    let both = ip("10.1.1.1:5060");
    assert_eq!(rule(&to(&both)).as_deref(), Some("voip"));
    let lan = ip("10.1.1.1:80");
    assert_eq!(rule(&to(&lan)).as_deref(), Some("lan"));
    let byname = TargetAddr::Domain("cdn.video.test".into(), 443);
    assert_eq!(rule(&to(&byname)).as_deref(), Some("video"));
    let other = ip("192.0.2.1:443");
    let sni = Facts {
        sni: Some("x.video.test"),
        ..to(&other)
    };
    assert_eq!(
        rule(&sni).as_deref(),
        Some("video"),
        "the TLS server name counts as a host name"
    );
    assert_eq!(rule(&to(&other)), None);
    let uid = Facts {
        uid: Some(1000),
        gid: Some(50),
        ..to(&other)
    };
    assert_eq!(rule(&uid).as_deref(), Some("alice"));
    let gid = Facts {
        uid: Some(1001),
        gid: Some(50),
        ..to(&other)
    };
    assert_eq!(rule(&gid).as_deref(), Some("staff"));
    let cg = Facts {
        cgroup: Some("/system.slice/apt.service/sub"),
        ..to(&other)
    };
    assert_eq!(rule(&cg).as_deref(), Some("updates"));
    let not_cg = Facts {
        cgroup: Some("/system.slice/apt.service2"),
        ..to(&other)
    };
    assert_eq!(rule(&not_cg), None, "a cgroup prefix ends at a '/'");
    let user = Facts {
        user: Some("bob"),
        listener: Some("socks"),
        ..to(&other)
    };
    let d = p.decide(&user);
    assert_eq!(
        (d.rule.as_deref(), d.scheduler.map(SchedulerKind::name)),
        (Some("bob"), Some("ecf"))
    );
    let bulk = Facts {
        class: Some(TrafficClass::Bulk),
        ..to(&other)
    };
    assert_eq!(p.decide(&bulk).scheduler.map(SchedulerKind::name), Some("minrtt"));
    let tp = Facts {
        listener: Some("transparent"),
        ..to(&other)
    };
    let d = p.decide(&tp);
    assert_eq!(
        (d.rule.as_deref(), d.scheduler.map(SchedulerKind::name), d.energy),
        (Some("tproxy"), Some("redundant"), Energy::Aware)
    );
}

#[test]
fn the_mask_holds_exactly_the_allowed_paths() {
    let p = rules(
        "[[rules]]\nports = [1]\npaths = [\"lte\"]\n[[rules]]\nports = [2]\ntiers = [\"primary\"]\n\
         [[rules]]\nports = [3]\npaths = [\"lte\"]\ntiers = [\"primary\"]\n",
    )
    .unwrap();
    let mask = |port| p.decide(&to(&ip(&format!("192.0.2.1:{port}")))).mask(&paths());
    assert_eq!(mask(1), 0b10);
    assert_eq!(mask(2), 0b01);
    assert_eq!(mask(3), 0b11);
    assert_eq!(mask(4), mpflex_engine::ALL_PATHS, "no rule: every path");
    assert_eq!(p.decide(&to(&ip("192.0.2.1:3"))).paths_text(), "lte,tier:primary");
}

#[test]
fn a_rule_an_earlier_one_covers_is_refused() {
    let e = rules("[[rules]]\nports = [\"1-100\"]\npaths = [\"wifi\"]\n[[rules]]\nname = \"ssh\"\nports = [22]\ncidrs = [\"10.0.0.0/8\"]\npaths = [\"lte\"]\n")
        .unwrap_err();
    assert!(e.starts_with("rules[1].name: \"ssh\" can never match: rules[0]"), "{e}");
    let e = rules("[[rules]]\npaths = [\"wifi\"]\n[[rules]]\nuids = [1]\npaths = [\"lte\"]\n").unwrap_err();
    assert!(
        e.contains("can never match"),
        "a catch-all shadows everything after it: {e}"
    );
    let e = rules("[[rules]]\nhosts = [\"example.com\"]\npaths = [\"wifi\"]\n[[rules]]\nhosts = [\"a.example.com\"]\npaths = [\"lte\"]\n").unwrap_err();
    assert!(e.contains("can never match"), "{e}");
    // Narrower first is fine; so are rules that overlap without covering.
    rules("[[rules]]\nports = [22]\npaths = [\"lte\"]\n[[rules]]\nports = [\"1-100\"]\npaths = [\"wifi\"]\n").unwrap();
    rules("[[rules]]\nports = [22]\npaths = [\"lte\"]\n[[rules]]\nports = [22]\nuids = [5]\npaths = [\"wifi\"]\n")
        .unwrap_err();
    rules("[[rules]]\nports = [22]\nuids = [5]\npaths = [\"lte\"]\n[[rules]]\nports = [22]\npaths = [\"wifi\"]\n")
        .unwrap();
}

#[test]
fn bad_rules_name_the_key() {
    for (text, want) in [
        ("ports = [1]\nport = 2\n", "unknown field `port`"),
        (
            "ports = [1]\npaths = [\"dsl\"]\n",
            "rules[0].paths: no path is named \"dsl\"",
        ),
        ("ports = [1]\npaths = []\n", "rules[0].paths: an empty list"),
        (
            "ports = [1]\ntiers = [\"gold\"]\n",
            "rules[0].tiers: unknown tier \"gold\"",
        ),
        (
            "ports = [1]\nscheduler = \"fast\"\n",
            "rules[0].scheduler: unknown scheduler \"fast\"",
        ),
        (
            "ports = [1]\nscheduler = \"ecf\"\nredundant = true\n",
            "rules[0].redundant: contradicts",
        ),
        (
            "ports = [1]\nclass = \"gold\"\n",
            "rules[0].class: unknown traffic class",
        ),
        ("ports = [1]\nenergy = \"low\"\n", "rules[0].energy: unknown \"low\""),
        ("ports = [\"9-1\"]\n", "rules[0].ports: bad port range"),
        ("cidrs = [\"10/33\"]\n", "rules[0].cidrs: bad CIDR"),
        ("listeners = [\"http\"]\n", "rules[0].listeners: unknown listener"),
        ("traffic = [\"gold\"]\n", "rules[0].traffic: unknown traffic class"),
        (
            "cgroups = [\"user.slice\"]\n",
            "rules[0].cgroups: \"user.slice\" is not a cgroup path",
        ),
    ] {
        let e = rules(&format!("[[rules]]\n{text}")).unwrap_err();
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn no_rules_give_the_defaults() {
    let p = Policy::new(&[], None).unwrap();
    assert!(p.is_empty());
    let d = p.decide(&to(&ip("1.2.3.4:80")));
    assert_eq!(d, Decision::default());
    assert_eq!(d.mask(&paths()), mpflex_engine::ALL_PATHS);
}
