//! Unit tests of the event table, the filter and the renderers (the ring's
//! own are in `imp/ring.rs`).
//! Behaviour that depends on the environment variables (arming, the
//! exception observer, real pool objects) is tested in `tests/objects/trace.rs`,
//! in child processes.

use super::*;

/// Every source file of the crate (its path below `src/`), for the
/// recording-site scan. A test checks that every module any of them declares
/// has its file here.
const SOURCES: &[(&str, &str)] = &[
    ("lib.rs", include_str!("../lib.rs")),
    ("callback/mod.rs", include_str!("../callback/mod.rs")),
    ("callback/arming.rs", include_str!("../callback/arming.rs")),
    ("sync.rs", include_str!("../sync.rs")),
    ("trace/mod.rs", include_str!("mod.rs")),
    ("trace/table.rs", include_str!("table.rs")),
    ("trace/events/mod.rs", include_str!("events/mod.rs")),
    ("trace/events/cleanup_group.rs", include_str!("events/cleanup_group.rs")),
    ("trace/events/exception.rs", include_str!("events/exception.rs")),
    ("trace/events/heal.rs", include_str!("events/heal.rs")),
    ("trace/events/io.rs", include_str!("events/io.rs")),
    ("trace/events/pool.rs", include_str!("events/pool.rs")),
    ("trace/events/timer.rs", include_str!("events/timer.rs")),
    ("trace/events/wait.rs", include_str!("events/wait.rs")),
    ("trace/events/work.rs", include_str!("events/work.rs")),
    ("trace/imp/mod.rs", include_str!("imp/mod.rs")),
    ("trace/imp/clock.rs", include_str!("imp/clock.rs")),
    ("trace/imp/exceptions.rs", include_str!("imp/exceptions.rs")),
    ("trace/imp/render.rs", include_str!("imp/render.rs")),
    ("trace/imp/ring.rs", include_str!("imp/ring.rs")),
    ("trace/tests.rs", include_str!("tests.rs")),
    ("callback_env.rs", include_str!("../callback_env.rs")),
    ("callback/inplace.rs", include_str!("../callback/inplace.rs")),
    ("cleanup_group/mod.rs", include_str!("../cleanup_group/mod.rs")),
    ("cleanup_group/members.rs", include_str!("../cleanup_group/members.rs")),
    ("callback/ctx/mod.rs", include_str!("../callback/ctx/mod.rs")),
    ("callback/ctx/arena.rs", include_str!("../callback/ctx/arena.rs")),
    ("callback/ctx/blocks.rs", include_str!("../callback/ctx/blocks.rs")),
    ("callback/local.rs", include_str!("../callback/local.rs")),
    ("callback/obligation.rs", include_str!("../callback/obligation.rs")),
    ("callback/owner.rs", include_str!("../callback/owner.rs")),
    ("handle.rs", include_str!("../handle.rs")),
    ("heal/mod.rs", include_str!("../heal/mod.rs")),
    ("heal/registry.rs", include_str!("../heal/registry.rs")),
    ("instance.rs", include_str!("../instance.rs")),
    ("io/mod.rs", include_str!("../io/mod.rs")),
    ("io/compat/mod.rs", include_str!("../io/compat/mod.rs")),
    ("io/compat/object.rs", include_str!("../io/compat/object.rs")),
    ("io/compat/sides.rs", include_str!("../io/compat/sides.rs")),
    ("io/compat/traits.rs", include_str!("../io/compat/traits.rs")),
    ("io/engine.rs", include_str!("../io/engine.rs")),
    ("io/future.rs", include_str!("../io/future.rs")),
    ("io/handles.rs", include_str!("../io/handles.rs")),
    ("io/iocore.rs", include_str!("../io/iocore.rs")),
    ("io/object.rs", include_str!("../io/object.rs")),
    ("io/op/mod.rs", include_str!("../io/op/mod.rs")),
    ("io/op/fs.rs", include_str!("../io/op/fs.rs")),
    ("io/op/pipe.rs", include_str!("../io/op/pipe.rs")),
    ("pipe/mod.rs", include_str!("../pipe/mod.rs")),
    ("signal.rs", include_str!("../signal.rs")),
    ("service.rs", include_str!("../service.rs")),
    ("pipe/busy.rs", include_str!("../pipe/busy.rs")),
    ("pipe/listener.rs", include_str!("../pipe/listener.rs")),
    ("pipe/options.rs", include_str!("../pipe/options.rs")),
    ("pipe/stream.rs", include_str!("../pipe/stream.rs")),
    ("io/op/socket.rs", include_str!("../io/op/socket.rs")),
    ("io/operation.rs", include_str!("../io/operation.rs")),
    ("io/kept.rs", include_str!("../io/kept.rs")),
    ("io/registry.rs", include_str!("../io/registry.rs")),
    ("io/tests.rs", include_str!("../io/tests.rs")),
    ("net/compat.rs", include_str!("../net/compat.rs")),
    ("net/mod.rs", include_str!("../net/mod.rs")),
    ("net/bind.rs", include_str!("../net/bind.rs")),
    ("net/futures.rs", include_str!("../net/futures.rs")),
    ("net/tcp.rs", include_str!("../net/tcp.rs")),
    ("net/udp.rs", include_str!("../net/udp.rs")),
    ("placement.rs", include_str!("../placement.rs")),
    ("pool.rs", include_str!("../pool.rs")),
    ("process/mod.rs", include_str!("../process/mod.rs")),
    ("process/child.rs", include_str!("../process/child.rs")),
    ("process/stdio.rs", include_str!("../process/stdio.rs")),
    ("process/tests.rs", include_str!("../process/tests.rs")),
    ("callback/reentry.rs", include_str!("../callback/reentry.rs")),
    ("hyper.rs", include_str!("../hyper.rs")),
    ("callback/spans.rs", include_str!("../callback/spans.rs")),
    ("sys/mod.rs", include_str!("../sys/mod.rs")),
    ("sys/winsock.rs", include_str!("../sys/winsock.rs")),
    ("task/mod.rs", include_str!("../task/mod.rs")),
    ("task/current_thread.rs", include_str!("../task/current_thread.rs")),
    ("task/budget.rs", include_str!("../task/budget.rs")),
    ("task/blocking.rs", include_str!("../task/blocking.rs")),
    ("task/future.rs", include_str!("../task/future.rs")),
    ("task/header.rs", include_str!("../task/header.rs")),
    ("task/parallel.rs", include_str!("../task/parallel.rs")),
    ("task/chunked.rs", include_str!("../task/chunked.rs")),
    ("task/scoped.rs", include_str!("../task/scoped.rs")),
    ("time/mod.rs", include_str!("../time/mod.rs")),
    ("sys/deadline.rs", include_str!("../sys/deadline.rs")),
    ("time/delay.rs", include_str!("../time/delay.rs")),
    ("time/driver.rs", include_str!("../time/driver.rs")),
    ("time/limit.rs", include_str!("../time/limit.rs")),
    ("time/ticks.rs", include_str!("../time/ticks.rs")),
    ("timer/mod.rs", include_str!("../timer/mod.rs")),
    ("timer/periodic.rs", include_str!("../timer/periodic.rs")),
    ("timer/timercore.rs", include_str!("../timer/timercore.rs")),
    ("wait/mod.rs", include_str!("../wait/mod.rs")),
    ("wait/future.rs", include_str!("../wait/future.rs")),
    ("wait/waitcore.rs", include_str!("../wait/waitcore.rs")),
    ("callback/unwind.rs", include_str!("../callback/unwind.rs")),
    ("callback/waker_slot.rs", include_str!("../callback/waker_slot.rs")),
    ("work.rs", include_str!("../work.rs")),
];

/// A recording site found in the sources: `(file:line, table target, event)`.
type Site = (String, &'static str, &'static str);

/// Reads a string-literal macro argument at the start of `rest` (after
/// spaces): `Some(Some(text))`, `Some(None)` for a `$metavariable` (the
/// macros' own bodies), and `None` for anything else.
fn literal_arg(rest: &'static str) -> Option<Option<(&'static str, &'static str)>> {
    let rest = rest.trim_start();
    if rest.starts_with('$') {
        return Some(None);
    }
    let body = rest.strip_prefix('"')?;
    let end = body.find('"')?;
    let after = body[end + 1..].trim_start();
    Some(Some((&body[..end], after.strip_prefix(',').unwrap_or(after))))
}

/// Every `trace_record!`/`trace_call!` invocation in the sources, and every
/// use of `src/timer/timercore.rs`'s `record_kind` macro (which records
/// under `timer` or `timer-periodic`, so it stands for both).
fn recording_sites() -> Vec<Site> {
    // Built with `concat!` so that these patterns do not match themselves.
    let record = concat!("trace_record", "!(");
    let call = concat!("trace_call", "!(");
    let kind = concat!("record_kind", "!(");
    let mut sites = Vec::new();
    for &(file, text) in SOURCES {
        for (pos, _) in text.match_indices(kind) {
            let at = format!("{file}:{}", text[..pos].lines().count());
            let rest = &text[pos + kind.len()..];
            let Some((_, rest)) = rest.split_once(',') else { continue };
            match literal_arg(rest) {
                Some(Some((event, _))) => {
                    sites.push((at.clone(), "timer", event));
                    sites.push((at, "timer-periodic", event));
                }
                Some(None) => {}
                None => panic!("{at}: the event of record_kind! is not a string literal"),
            }
        }
        for (pattern, is_call) in [(record, false), (call, true)] {
            for (pos, _) in text.match_indices(pattern) {
                let at = format!("{file}:{}", text[..pos].lines().count());
                let rest = &text[pos + pattern.len()..];
                let Some(first) = literal_arg(rest) else { panic!("{at}: first argument is not a string literal") };
                let Some((first, rest)) = first else { continue };
                if is_call {
                    sites.push((at, "syscall", first));
                    continue;
                }
                match literal_arg(rest) {
                    Some(Some((event, _))) => sites.push((at, table_target(first), event)),
                    Some(None) => {}
                    None => panic!("{at}: second argument is not a string literal"),
                }
            }
        }
    }
    sites
}

/// The modules `text` declares with `mod name;` in a file of its own (not
/// through `#[path]`, which names a file outside the crate's tree), as paths
/// below the file's module directory: `a/b` for a `mod b;` inside an inline
/// `mod a { .. }` (as `lib.rs` declares the host's cores).
fn declared_modules(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    // The inline modules open at this line: (indentation, name).
    let mut inline: Vec<(usize, &str)> = Vec::new();
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim();
        let indent = raw.len() - raw.trim_start().len();
        if line == "}" && inline.last().is_some_and(|&(d, _)| d == indent) {
            inline.pop();
            continue;
        }
        let rest = line.strip_prefix("pub(crate) ").or_else(|| line.strip_prefix("pub ")).unwrap_or(line);
        let Some(decl) = rest.strip_prefix("mod ") else { continue };
        if let Some(name) = decl.strip_suffix(" {") {
            inline.push((indent, name));
            continue;
        }
        let Some(name) = decl.strip_suffix(';') else { continue };
        let attrs = lines[..i].iter().map(|l| l.trim()).rev().take_while(|l| l.starts_with("#["));
        if !attrs.clone().any(|a| a.starts_with("#[path")) {
            let outer: String = inline.iter().map(|(_, m)| format!("{m}/")).collect();
            out.push(format!("{outer}{name}"));
        }
    }
    out
}

#[test]
fn every_module_of_the_crate_is_scanned() {
    let mut declared = 0;
    for &(file, text) in SOURCES {
        // `lib.rs` and `mod.rs` declare modules beside them, `x.rs` in `x/`.
        let dir = match file.rsplit_once('/') {
            _ if file == "lib.rs" => String::new(),
            Some((dir, "mod.rs")) => format!("{dir}/"),
            _ => format!("{}/", file.trim_end_matches(".rs")),
        };
        for name in declared_modules(text) {
            declared += 1;
            let (flat, nested) = (format!("{dir}{name}.rs"), format!("{dir}{name}/mod.rs"));
            assert!(
                SOURCES.iter().any(|(f, _)| *f == flat || *f == nested),
                "src/{flat} (or src/{nested}), declared in src/{file}, is not in SOURCES of src/trace/tests.rs: \
                 its recording sites would go unchecked"
            );
        }
    }
    // lib.rs alone declares more than this; fewer means the scan broke.
    assert!(declared > 20, "only {declared} module declarations found");
}

#[test]
fn every_recording_site_is_in_the_event_table_and_every_event_is_recorded() {
    let sites = recording_sites();
    // work.rs and pool.rs alone hold more than this; fewer means the scan broke.
    assert!(sites.len() >= 20, "only {} recording sites found: {sites:?}", sites.len());
    for (at, target, event) in &sites {
        assert!(known(target, event), "{at}: `{target} {event}` is recorded but missing from the event table");
    }
    for e in events() {
        assert!(
            sites.iter().any(|(_, t, ev)| *t == e.target && *ev == e.event),
            "`{} {}` is in the event table but nothing records it",
            e.target,
            e.event
        );
    }
}

#[test]
fn the_event_table_is_well_formed() {
    let all: Vec<&EventInfo> = events().collect();
    for (i, e) in all.iter().enumerate() {
        assert!(e.target == "syscall" || !e.meaning.is_empty(), "`{} {}` has no meaning", e.target, e.event);
        assert!(
            !all[..i].iter().any(|o| o.target == e.target && o.event == e.event),
            "`{} {}` is listed twice",
            e.target,
            e.event
        );
    }
    assert!(known("syscall-enter", "SubmitThreadpoolWork") && known("syscall-leave", "SubmitThreadpoolWork"));
    assert!(!known("syscall", "NoSuchCall") && !known("work", "no-such-event") && !known("nowhere", "created"));
}

#[test]
fn target_masks() {
    for (i, t) in TARGETS.iter().enumerate() {
        assert_eq!(target_mask(t), 1 << i, "{t}");
    }
    assert_eq!(target_mask("syscall"), target_mask("syscall-enter") | target_mask("syscall-leave"));
    assert_eq!(target_mask("bogus"), OTHER_BIT);
    assert_eq!(target_mask("timer") & target_mask("timer-periodic"), 0);
    // TARGETS is derived from the table: every target the table names has a
    // bit of its own, and nothing else does.
    for e in events() {
        assert_ne!(target_mask(e.target), OTHER_BIT, "`{}` has no filter bit", e.target);
    }
    for &t in TARGETS {
        assert!(t.starts_with("syscall-") || events().any(|e| e.target == t), "`{t}` is in no event of the table");
    }
}

const BEGIN: &str = "<!-- BEGIN GENERATED EVENT TABLE (cargo xtask trace-doc) -->\n";
const END: &str = "<!-- END GENERATED EVENT TABLE -->";
/// Set by `cargo xtask trace-doc`: rewrite the section instead of comparing.
const BLESS_VAR: &str = "WINDOWS_THREADPOOL_BLESS";

#[test]
fn docs_reference_section_is_generated_from_the_event_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/trace.md");
    let doc = include_str!("../../docs/trace.md");
    let expected = reference_markdown();
    let (before, rest) = doc.split_once(BEGIN).expect("docs/trace.md lacks the BEGIN marker");
    let (current, after) = rest.split_once(END).expect("docs/trace.md lacks the END marker");
    if std::env::var_os(BLESS_VAR).is_some() {
        std::fs::write(path, format!("{before}{BEGIN}{expected}{END}{after}")).expect("write docs/trace.md");
        let written = std::fs::read_to_string(path).expect("read docs/trace.md back");
        assert!(written.contains(&format!("{BEGIN}{expected}{END}")), "the rewrite did not land in {path}");
        println!("regenerated the event table in {path}");
        return;
    }
    assert!(
        current == expected,
        "the event table in docs/trace.md is out of date: run `cargo xtask trace-doc`, or paste:\n{expected}"
    );
}

#[test]
fn reference_renders_slots_and_syscalls() {
    let md = reference_markdown();
    assert!(md.contains("| `work` | `created` | `work` (hex) | `context` (hex) | a work object was created |"), "{md}");
    assert!(md.contains("| `pool` | `created` | `pool` (hex) |  | a private pool was created |"), "{md}");
    assert!(md.contains("| `syscall` | `SetThreadpoolThreadMaximum` | `pool` (hex) | `threads` |"), "{md}");
    assert!(md.contains("| `exception` | `raised` | `code` (hex) | `address` (hex) |"), "{md}");
    assert_eq!(md.lines().count(), 2 + events().count());
}

// With the feature off, the payload of a recording site is never evaluated.
#[cfg(not(feature = "trace"))]
#[test]
fn without_the_feature_recording_evaluates_nothing() {
    let mut evaluated = 0;
    trace_record!(
        "work",
        "submitted",
        {
            evaluated += 1;
            evaluated
        },
        {
            evaluated += 10;
            0
        }
    );
    let r = trace_call!(
        "SubmitThreadpoolWork",
        {
            evaluated += 100;
            0
        },
        0,
        { 7 }
    );
    assert_eq!(r, 7);
    assert_eq!(evaluated, 0, "a recording macro evaluated its payload without the trace feature");
    record("work", "submitted", 1, 2);
    assert!(!enabled() && !wants("work") && !wants("*"));
    assert_eq!(dump(), "");
}

#[cfg(feature = "trace")]
#[allow(unreachable_pub)] // shared with the integration tests, where its items are used
#[path = "../../tests/support/json.rs"]
mod json;

#[cfg(feature = "trace")]
mod recorder {
    use super::super::imp::*;
    use super::super::{TARGETS, target_mask};
    use super::json;

    #[test]
    fn filter_parsing() {
        let all = EVERY_TARGET;
        assert_eq!(parse_filter(""), Filter { mask: 0, unknown: vec![] });
        assert_eq!(parse_filter(" , ,"), Filter { mask: 0, unknown: vec![] });
        assert_eq!(parse_filter("*").mask, all);
        assert_eq!(parse_filter("work, *").mask, all);
        assert_eq!(parse_filter("work").mask, target_mask("work"));
        assert_eq!(parse_filter(" work , pool ,").mask, target_mask("work") | target_mask("pool"));
        assert_eq!(parse_filter("syscall").mask, target_mask("syscall-enter") | target_mask("syscall-leave"));
        assert_eq!(parse_filter("syscall-leave").mask, target_mask("syscall-leave"));
        assert_eq!(parse_filter("timer").mask, target_mask("timer"), "timer does not include timer-periodic");
        assert_eq!(
            parse_filter("Work,bogus,io"),
            Filter { mask: target_mask("io"), unknown: vec!["Work".into(), "bogus".into()] }
        );
        for &t in TARGETS {
            assert_eq!(parse_filter(t).mask, 1 << TARGETS.iter().position(|x| *x == t).unwrap(), "{t}");
        }
    }

    #[test]
    fn capacity_parsing() {
        assert_eq!(parse_capacity("8"), Some(8));
        assert_eq!(parse_capacity(" 1000 "), Some(1024));
        assert_eq!(parse_capacity("1"), Some(1));
        assert_eq!(parse_capacity("0"), None);
        assert_eq!(parse_capacity("-4"), None);
        assert_eq!(parse_capacity("lots"), None);
        assert_eq!(parse_capacity(&(1u64 << 24).to_string()), Some(1 << 24));
        assert_eq!(parse_capacity(&((1u64 << 24) + 1).to_string()), None);
    }

    fn rec(index: u64, us: i64, tid: u32, target: &'static str, event: &'static str, a: u64, b: u64) -> Record {
        // Ticks are nanoseconds under a 1 GHz clock.
        Record { index, ticks: us * 1000, tid, target, event, a, b }
    }

    const CLOCK: Clock = Clock { start: 0, frequency: 1_000_000_000 };

    #[test]
    fn text_rows_name_their_slots() {
        let snap = Snapshot {
            records: vec![
                rec(0, 1, 12, "work", "created", 0x1a2b0, 0x55),
                rec(1, 2_500_000, 12, "syscall-enter", "SetThreadpoolThreadMaximum", 0xcafe, 2),
                rec(2, 3, 40, "pool", "created", 0xbeef, 0),
                rec(3, 4, 40, "pool", "created", 0xbeef, 9),
                rec(4, 5, 41, "heal", "made-up", 3, 4),
            ],
            dropped: 0,
            incomplete: 0,
            capacity: 8,
        };
        let text = render_text(&snap, CLOCK, &Header { filter: "*", unknown: &[], bad_capacity: None });
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            rows,
            [
                "   0.000001000     12 work created work=0x1a2b0 context=0x55",
                "   2.500000000     12 syscall-enter SetThreadpoolThreadMaximum pool=0xcafe threads=2",
                "   0.000003000     40 pool created pool=0xbeef",
                "   0.000004000     40 pool created pool=0xbeef b=9",
                "   0.000005000     41 heal made-up a=3 b=4",
            ]
        );
        assert!(text.starts_with("# windows-threadpool trace: filter \"*\", 5 records, capacity 8\n"), "{text}");
        assert!(!text.contains("overflow"), "{text}");
    }

    #[test]
    fn text_header_announces_overflow_and_ignored_names() {
        let snap = Snapshot {
            records: vec![rec(40, 1, 1, "work", "submitted", 1, 0)],
            dropped: 40,
            incomplete: 2,
            capacity: 1,
        };
        let unknown = ["bogus".to_string()];
        let text =
            render_text(&snap, CLOCK, &Header { filter: "work,bogus", unknown: &unknown, bad_capacity: Some("x") });
        assert!(
            text.contains("\n# overflow: 40 records dropped (the ring holds 1; the oldest were overwritten)\n"),
            "{text}"
        );
        assert!(text.contains("\n# 2 records not shown: still being written"), "{text}");
        assert!(text.contains("\n# not targets, ignored: bogus\n"), "{text}");
        assert!(text.contains("WINDOWS_THREADPOOL_TRACE_CAPACITY=\"x\" is not a capacity"), "{text}");
    }

    /// `(name, ph, tid, ts µs, dur µs, args)` of each non-metadata event.
    fn chrome_events(text: &str) -> Vec<(String, String, u64, f64, f64, json::Json)> {
        let doc = json::parse(text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
        doc.get("traceEvents")
            .and_then(|e| e.as_array())
            .expect("traceEvents")
            .iter()
            .filter(|e| e.get("ph").and_then(|p| p.as_str()) != Some("M"))
            .map(|e| {
                let s =
                    |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or_else(|| panic!("{k} in {e:?}")).to_string();
                let f = |k: &str| e.get(k).and_then(|v| v.as_f64());
                (
                    s("name"),
                    s("ph"),
                    e.get("tid").and_then(|t| t.as_u64()).unwrap(),
                    f("ts").unwrap(),
                    f("dur").unwrap_or(-1.0),
                    e.get("args").unwrap().clone(),
                )
            })
            .collect()
    }

    #[test]
    fn chrome_pairs_slices_per_thread() {
        let snap = Snapshot {
            records: vec![
                // Thread 5: a left whose entered was dropped, then a callback with a syscall inside.
                rec(0, 10, 5, "work", "trampoline-left", 0xa, 0),
                rec(1, 20, 5, "work", "trampoline-entered", 0xa, 0),
                rec(2, 21, 6, "syscall-enter", "SubmitThreadpoolWork", 0xa, 0),
                rec(3, 22, 5, "syscall-enter", "SubmitThreadpoolWork", 0xb, 0),
                rec(4, 23, 6, "syscall-leave", "SubmitThreadpoolWork", 0xa, 0),
                rec(5, 25, 5, "syscall-leave", "SubmitThreadpoolWork", 0xb, 0),
                rec(6, 26, 6, "work", "submitted", 0xb, 0),
                rec(7, 30, 5, "work", "trampoline-left", 0xa, 0),
                // Thread 7: entered, never left.
                rec(8, 40, 7, "work", "trampoline-entered", 0xb, 0),
                rec(9, 50, 6, "pool", "created", 0xbeef, 0),
                // Thread 8: a call nested in a call of the same name and object closes innermost first.
                rec(10, 60, 8, "syscall-enter", "WaitForThreadpoolWorkCallbacks", 0xc, 0),
                rec(11, 61, 8, "syscall-enter", "WaitForThreadpoolWorkCallbacks", 0xc, 0),
                rec(12, 62, 8, "syscall-leave", "WaitForThreadpoolWorkCallbacks", 0xc, 0),
                rec(13, 64, 8, "syscall-leave", "WaitForThreadpoolWorkCallbacks", 0xc, 0),
            ],
            dropped: 3,
            incomplete: 0,
            capacity: 16,
        };
        let text = render_chrome(&snap, CLOCK, 99);
        let doc = json::parse(&text).unwrap();
        assert_eq!(doc.get("otherData").and_then(|o| o.get("dropped")).and_then(|d| d.as_u64()), Some(3));
        let ev = chrome_events(&text);
        let find = |name: &str, tid: u64| {
            ev.iter().find(|e| e.0 == name && e.2 == tid).unwrap_or_else(|| panic!("{name} on {tid}: {ev:#?}"))
        };
        let stray = find("work trampoline-left", 5);
        assert_eq!((stray.1.as_str(), stray.3), ("i", 10.0));
        let cb = find("work callback", 5);
        assert_eq!((cb.1.as_str(), cb.3, cb.4), ("X", 20.0, 10.0));
        assert_eq!(cb.5.get("work").and_then(|w| w.as_str()), Some("0xa"));
        let inner = find("SubmitThreadpoolWork", 5);
        assert_eq!((inner.1.as_str(), inner.3, inner.4), ("X", 22.0, 3.0));
        assert_eq!(inner.5.get("work").and_then(|w| w.as_str()), Some("0xb"));
        let other = find("SubmitThreadpoolWork", 6);
        assert_eq!((other.3, other.4), (21.0, 2.0));
        let open = find("work callback", 7);
        assert_eq!((open.3, open.4), (40.0, 24.0), "an unfinished slice extends to the last record");
        assert_eq!(open.5.get("unfinished"), Some(&json::Json::Bool(true)));
        let created = find("pool created", 6);
        assert_eq!((created.1.as_str(), created.5.get("pool").and_then(|p| p.as_str())), ("i", Some("0xbeef")));
        let same: Vec<_> = ev
            .iter()
            .filter(|e| e.2 == 8)
            .map(|e| (e.1.as_str(), e.3, e.4, e.5.get("end-missing").is_some()))
            .collect();
        assert_eq!(same, [("X", 61.0, 1.0, false), ("X", 60.0, 4.0, false)]);
        assert_eq!(ev.len(), 9, "{ev:#?}");
        assert!(ev.iter().all(|e| e.0 != "work trampoline-entered" && !e.0.starts_with("syscall-")), "{ev:#?}");
    }

    #[test]
    fn chrome_closes_slices_whose_end_was_lost() {
        let snap = Snapshot {
            records: vec![
                rec(0, 1, 5, "work", "trampoline-entered", 0xa, 0),
                rec(1, 2, 5, "syscall-enter", "WaitForThreadpoolWorkCallbacks", 0xb, 0),
                rec(2, 5, 5, "work", "trampoline-left", 0xa, 0),
            ],
            dropped: 0,
            incomplete: 0,
            capacity: 16,
        };
        let ev = chrome_events(&render_chrome(&snap, CLOCK, 1));
        assert_eq!(ev.len(), 2, "{ev:#?}");
        let inner = ev.iter().find(|e| e.0 == "WaitForThreadpoolWorkCallbacks").unwrap();
        assert_eq!((inner.3, inner.4), (2.0, 3.0));
        assert_eq!(inner.5.get("end-missing"), Some(&json::Json::Bool(true)));
        let outer = ev.iter().find(|e| e.0 == "work callback").unwrap();
        assert_eq!((outer.3, outer.4), (1.0, 4.0));
    }
}

/// Record cost, printed, never asserted: `cargo test --release --features
/// trace --lib record_cost -- --nocapture` for meaningful numbers. Runs one
/// child process disarmed and one armed, since the filter is read once.
#[cfg(feature = "trace")]
#[test]
fn record_cost() {
    const TEST: &str = "trace::tests::record_cost";
    const CHILD: &str = "WINDOWS_THREADPOOL_TEST_CHILD";
    const DONE: i32 = 0x5A;
    let n: u64 = if cfg!(debug_assertions) { 100_000 } else { 2_000_000 };
    if let Ok(mode) = std::env::var(CHILD) {
        fn timed(n: u64, f: &impl Fn(u64)) -> f64 {
            let t = std::time::Instant::now();
            for i in 0..n {
                f(std::hint::black_box(i));
            }
            t.elapsed().as_nanos() as f64 / n as f64
        }
        /// ns per call of `f` on one thread, then on each of two at once.
        fn measure(n: u64, f: impl Fn(u64) + Sync) -> String {
            let one = timed(n, &f);
            let barrier = std::sync::Barrier::new(2);
            let two: Vec<f64> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            timed(n, &f)
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            format!("1 thread {one:.1} ns/record; 2 threads {:.1} and {:.1} ns/record each", two[0], two[1])
        }
        assert_eq!(enabled(), mode == "armed", "the child's filter is not what the parent set");
        let build = if cfg!(debug_assertions) { "debug" } else { "release" };
        let record = measure(n, |i| trace_record!("work", "submitted", i, 0));
        print!("record cost ({build}, {mode}): {record}");
        if mode == "armed" {
            // The parts: the ring alone (no clock, no thread id), and the clock.
            let ring = imp::Ring::new(imp::DEFAULT_CAPACITY);
            let ring_only = measure(n, |i| ring.push(i as i64, 1, "work", "submitted", i, 0));
            let clock = measure(n, |_| {
                std::hint::black_box(imp::now());
            });
            print!(" | ring push alone: {ring_only} | QueryPerformanceCounter alone: {clock}");
        }
        println!();
        if mode == "armed" {
            let text = dump();
            assert!(text.contains(&format!("capacity {}", imp::DEFAULT_CAPACITY)), "{}", &text[..200]);
            assert!(text.contains("# overflow: "), "3n records in a ring of 262144 must overflow");
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(DONE);
    }
    for (mode, filter) in [("disarmed", ""), ("armed", "work")] {
        let out = crate::test_start::output(
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD, mode)
                .env(imp::FILTER_VAR, filter)
                .env_remove(imp::CAPACITY_VAR),
        )
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(DONE), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let at = stdout.find("record cost").unwrap_or_else(|| panic!("no numbers from the child: {stdout}"));
        println!("{}", stdout[at..].lines().next().unwrap_or_default());
    }
}

/// Items only the crate's own tests need are `#[doc(hidden)] pub` behind the
/// `test-hooks` feature alone: a hidden public item without it is reachable
/// by every dependent, whatever the documentation shows.
#[test]
fn hidden_public_items_exist_only_with_test_hooks() {
    // Built with `concat!` so that these patterns do not match themselves.
    let hidden = concat!("#[doc", "(hidden)]");
    let feature = concat!("feature = \"test", "-hooks\"");
    for &(file, text) in SOURCES {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, _) in lines.iter().enumerate().filter(|(_, l)| **l == hidden) {
            let is_attr = |l: &&str| l.starts_with("#[");
            let start = lines[..i].iter().rposition(|l| !is_attr(l)).map_or(0, |p| p + 1);
            let end = i + lines[i..].iter().position(|l| !is_attr(l)).expect("an item follows its attributes");
            let item = lines[end];
            if !item.starts_with("pub ") {
                continue;
            }
            let gated = lines[start..end]
                .iter()
                .any(|a| a.starts_with("#[cfg") && a.contains(feature) && !a.contains(&format!("not({feature})")));
            if gated {
                continue;
            }
            panic!("src/{file}:{}: `{item}` is public and hidden without the test-hooks feature", end + 1);
        }
    }
}
