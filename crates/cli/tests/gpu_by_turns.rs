//! `scripts/gpu_by_turns.sh` with a stand-in for `marrow bench gpu` (no GPU
//! here): variants run in turns, each run's text and figures are kept, a
//! binary without `--json-out` runs with `--json`, a failed run stays out
//! of the table, and the real `marrow bench compare` makes the table.

use std::path::Path;
use std::process::Command;

/// A stand-in binary: `bench compare` is the real marrow's; `bench gpu`
/// logs its turn, prints a line of text (on stderr with `--json`), and writes a report whose ratio
/// is 1.1 without knobs and 0.9 with any. `old` lacks `--json-out`, as
/// builds before it do; `fail` exits 1 without figures.
fn stand_in(dir: &Path, name: &str, old: bool, fail: bool) -> String {
    let path = dir.join(name);
    let script = format!(
        r#"#!/bin/bash
if [ "$1 $2" = "bench compare" ]; then exec "{real}" "$@"; fi
if [ "$3" = "--help" ]; then {help}; exit 0; fi
echo "{name} ${{MARROW_NVRTC_DEFINE:-defaults}} $*" >> "{log}"
# With --json, stdout is the report alone, as marrow's.
if [ "$3" = "--json" ]; then echo "text of {name}" >&2; else echo "text of {name}"; fi
{fail}
ratio=1.1; met=true
[ -n "$MARROW_NVRTC_DEFINE" ] && ratio=0.9 && met=false
json='{{"bench":"bench gpu","device":"stand-in","rows":[{{"section":"shared","figure":"(a) posting","measured":1,"measured_unit":"puts/s","floor":1,"floor_unit":"puts/s","floor_name":"f","ratio":'$ratio',"ratio_of":"measured / floor","target":">= 1","target_met":'$met'}}]}}'
if [ "$3" = "--json-out" ]; then echo "$json" > "$4"; else echo "$json"; fi
"#,
        real = env!("CARGO_BIN_EXE_marrow"),
        help = if old { "echo '--json'" } else { "echo '--json-out <FILE>'" },
        log = dir.join("turns.log").display(),
        fail = if fail { "exit 1" } else { "" },
    );
    std::fs::write(&path, script).unwrap();
    Command::new("chmod").arg("+x").arg(&path).status().unwrap();
    path.display().to_string()
}

#[test]
fn variants_run_in_turns_and_the_table_compares_them() {
    let dir = std::env::temp_dir().join(format!("marrow-by-turns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let new = stand_in(&dir, "new", false, false);
    let old = stand_in(&dir, "old", true, false);
    let broken = stand_in(&dir, "broken", false, true);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gpu_by_turns.sh");
    let out = dir.join("out");
    let run = Command::new("bash")
        .arg(&script)
        .arg(&out)
        .arg("2")
        .args([format!("head={new}"), format!("knob={new}@MARROW_X=1"), format!("main={old}"), format!("bad={broken}")])
        .args(["--", "--only", "rates"])
        .output()
        .unwrap();
    let log = std::fs::read_to_string(dir.join("turns.log")).unwrap_or_default();
    let table = std::fs::read_to_string(out.join("compare.md")).unwrap_or_default();
    let text = std::fs::read_to_string(out.join("head-r1.txt")).unwrap_or_default();
    let old_text = std::fs::read_to_string(out.join("main-r2.txt")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    // The broken variant's failure shows in the exit status.
    assert_eq!(run.status.code(), Some(1), "{}", String::from_utf8_lossy(&run.stderr));
    let turns: Vec<&str> = log.lines().collect();
    assert_eq!(
        turns,
        [
            "new defaults bench gpu --json-out OUT/head-r1.json --only rates",
            "new MARROW_X=1 bench gpu --json-out OUT/knob-r1.json --only rates",
            "old defaults bench gpu --json --only rates",
            "broken defaults bench gpu --json-out OUT/bad-r1.json --only rates",
            "new defaults bench gpu --json-out OUT/head-r2.json --only rates",
            "new MARROW_X=1 bench gpu --json-out OUT/knob-r2.json --only rates",
            "old defaults bench gpu --json --only rates",
            "broken defaults bench gpu --json-out OUT/bad-r2.json --only rates",
        ]
        .map(|t| t.replace("OUT", &out.display().to_string())),
        "{log}"
    );
    assert_eq!(text, "text of new\nrc=0\n");
    // What a `--json` run prints on stderr is kept (marrow itself prints
    // no text with `--json`: an old binary's run keeps only its rc).
    assert_eq!(old_text, "text of old\nrc=0\n");
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.first(), Some(&"| Section | Figure (unit, target) | head | knob | main |"), "{table}");
    assert_eq!(
        rows.get(2),
        Some(
            &"| shared | (a) posting (ratio, >= 1) | 1.100 / 1.100 (2/2 met) | 0.900 / 0.900 (0/2 met) | 1.100 / 1.100 (2/2 met) |"
        ),
        "{table}"
    );
}
