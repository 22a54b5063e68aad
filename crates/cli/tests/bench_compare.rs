//! `marrow bench compare` on reports written as the README's schema says:
//! rounds of each build side by side, and bad input refused by name.

use std::path::PathBuf;
use std::process::Command;

fn marrow(args: &[String]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).output().unwrap()
}

/// A `bench gpu` report with one posting figure (ratio `ratio`, target
/// >= 1) and one latency without a floor, in the schema's field names.
fn report(bench: &str, ratio: f64, us: f64) -> String {
    format!(
        r#"{{"bench":"{bench}","device":"NVIDIA H100 80GB HBM3 (sm_90)","rows":[
{{"section":"shared","figure":"(a) 8 B put_nbi posting, whole GPU, put_nbi_warp","measured":{m},"measured_unit":"puts/s",
 "floor":1.5e8,"floor_unit":"puts/s","floor_name":"the same stores and fences","ratio":{ratio},"ratio_of":"measured / floor",
 "target":">= 1","target_met":{met}}},
{{"section":"shared","figure":"8 B blocking put + completion","measured":{us},"measured_unit":"us","floor":null,"floor_unit":null,
 "floor_name":null,"ratio":null,"ratio_of":null,"target":null,"target_met":null}}]}}"#,
        m = ratio * 1.5e8,
        met = ratio >= 1.0
    )
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("marrow-compare-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &std::path::Path, file: &str, text: &str) -> String {
    let p = d.join(file);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn rounds_of_each_build_stand_side_by_side() {
    let d = dir("rounds");
    let h1 = write(&d, "h1.json", &report("bench gpu", 0.98, 3.07));
    let m1 = write(&d, "m1.json", &report("bench gpu", 1.2, 3.57));
    let h2 = write(&d, "h2.json", &report("bench gpu", 1.062, 3.16));
    let out =
        marrow(&["bench".into(), "compare".into(), format!("head={h1}"), format!("main={m1}"), format!("head={h2}")]);
    let _ = std::fs::remove_dir_all(&d);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = t.lines().collect();
    assert_eq!(rows[0], "| Section | Figure (unit, target) | head | main |", "{t}");
    assert_eq!(
        rows[2],
        "| shared | (a) 8 B put_nbi posting, whole GPU, put_nbi_warp (ratio, >= 1) | 0.980 / 1.062 (1/2 met) | 1.200 (1/1 met) |"
    );
    assert_eq!(rows[3], "| shared | 8 B blocking put + completion (us) | 3.07 / 3.16 | 3.57 |");
    assert_eq!(rows.len(), 4, "{t}");
}

#[test]
fn only_the_figures_asked_for() {
    let d = dir("match");
    let a = write(&d, "a.json", &report("bench gpu", 1.0, 3.0));
    let out = marrow(&["bench".into(), "compare".into(), "--match".into(), "blocking".into(), a]);
    let _ = std::fs::remove_dir_all(&d);
    let t = String::from_utf8(out.stdout).unwrap();
    // Labelled by the file's name; one figure left.
    assert!(t.starts_with("| Section | Figure (unit, target) | a |"), "{t}");
    assert_eq!(t.lines().count(), 3, "{t}");
    assert!(t.contains("8 B blocking put"), "{t}");
}

#[test]
fn bad_input_is_refused_by_name_with_status_2() {
    let d = dir("bad");
    let good = write(&d, "good.json", &report("bench gpu", 1.0, 3.0));
    let p2p = write(&d, "p2p.json", &report("bench p2p", 1.0, 3.0));
    let junk = write(&d, "junk.json", "{\"rows\": 3}");
    let missing = d.join("missing.json").display().to_string();
    let cases = [
        (vec![junk.clone()], format!("{junk}: not a bench report")),
        (vec![missing.clone()], format!("{missing}: ")),
        (vec![good.clone(), p2p], "\"p2p\" has a report of `bench p2p`, the first one is of `bench gpu`".to_string()),
    ];
    for (files, want) in cases {
        let mut args = vec!["bench".to_string(), "compare".to_string()];
        args.extend(files);
        let out = marrow(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: a table despite the error");
    }
    let _ = std::fs::remove_dir_all(&d);
}
