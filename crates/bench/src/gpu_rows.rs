//! The rows `bench gpu`, `demo --gpu` and `bench p2p` report, made from the
//! same numbers their text lines print, with the same ratio arithmetic, so
//! the JSON and the text of one run agree. Apart from the GPU code so it
//! can be tested with synthetic figures where there is no GPU.

use crate::figure_report::{FLOOR_OVER_MEASURED, MEASURED_OVER_FLOOR, Row, Target};

/// The blocking-put latency floor.
pub const PINGPONG_FLOOR: &str =
    "GPU<->CPU ping-pong through host memory, the pong walking a CQ-sized ring, the faster flavour";
/// The posting-rate floor, before its ring note.
pub const STORE_FLOOR: &str = "the same stores and fences, the WQEs into the same send queue";
/// The bandwidth floor of `bench gpu`'s (d).
pub const MEMCPY_FLOOR: &str = "cuMemcpy host->host of the same bytes";
/// The compute->put loop's comparison.
pub const CPU_INITIATED: &str = "CPU-initiated (kernel ends, host posts, next launch)";
/// `bench p2p`'s bandwidth floor.
pub const COPY_ENGINE: &str = "copy engine into the peer's window (cudaMemcpyPeer's path)";

fn channel(exclusive: bool) -> &'static str {
    if exclusive { "exclusive" } else { "shared" }
}

/// A traced channel's put and its three steps (means over `n` puts, us).
pub fn breakdown(exclusive: bool, per_put_us: f64, n: u64, steps_us: [f64; 3]) -> Vec<Row> {
    let traced = format!("traced {} channel", channel(exclusive));
    let mut rows = vec![Row::new(format!("{traced}: 8 B blocking put"), per_put_us, "us")];
    for (step, us) in
        ["WQE written -> doorbell rung", "doorbell -> CQE consumed", "CQE -> next WQE written"].iter().zip(steps_us)
    {
        rows.push(Row::new(format!("{traced}, mean of the last {n} puts: {step}"), us, "us"));
    }
    rows
}

/// The blocking put's target over the ping-pong floor. An exclusive
/// channel's put is the floor's round trip plus a post and the engine's
/// work, so it is held close to it; a shared channel's adds the
/// reservation, the ready chain and the CQ lock, each an L2 round trip.
pub fn blocking_put_target(exclusive: bool) -> Target {
    if exclusive { Target::AtMost(1.1) } else { Target::AtMost(1.7) }
}

/// Who posts in a posting-rate run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Posters {
    /// One thread.
    Thread,
    /// One warp, its lanes posting together.
    Warp,
    /// A whole GPU (132 x 128) on this many channels.
    WholeGpu { channels: usize },
}

/// (a)'s target over the store floor. An exclusive owner's post is the
/// floor's stores with no protocol around them: 0.9. On a shared channel
/// a lone thread or warp pays the protocol's L2 round trips in full: 0.7.
/// A whole GPU on one shared channel queues on the reservation and the
/// chain: 0.25, except through `put_nbi_warp`, which reserves once per
/// warp and should keep up with the floor's one fence per WQE: 1.0. Many
/// channels spread the queue: 0.8. Lazy doorbells (`lazy`) are measured
/// against a floor that rings as seldom as they do, and keep the 0.8 they
/// were built to.
pub fn posting_target(exclusive: bool, lazy: bool, posters: Posters, warp_put: bool) -> Target {
    match (exclusive, posters) {
        _ if lazy => Target::AtLeast(0.8),
        (true, _) => Target::AtLeast(0.9),
        (false, Posters::Thread | Posters::Warp) => Target::AtLeast(0.7),
        (false, Posters::WholeGpu { channels: 1 }) if warp_put => Target::AtLeast(1.0),
        (false, Posters::WholeGpu { channels: 1 }) => Target::AtLeast(0.25),
        (false, Posters::WholeGpu { .. }) => Target::AtLeast(0.8),
    }
}

/// The 8 B blocking put against the ping-pong floor (both flavours, ns);
/// the ratio is the text's `put_ns / floor`.
pub fn blocking_put(
    exclusive: bool,
    put_ns: f64,
    floors_ns: [f64; 2],
    put_median_us: f64,
    floor_median_us: f64,
) -> Vec<Row> {
    let floor = floors_ns[0].min(floors_ns[1]);
    vec![
        Row::new("8 B blocking put + completion", put_ns / 1e3, "us")
            .floor(floor / 1e3, "us", PINGPONG_FLOOR, put_ns / floor, MEASURED_OVER_FLOOR)
            .target(blocking_put_target(exclusive)),
        Row::new("8 B blocking put + completion, median", put_median_us, "us").floor(
            floor_median_us,
            "us",
            "the ping-pong floor's median",
            put_median_us / floor_median_us,
            MEASURED_OVER_FLOOR,
        ),
        Row::new("GPU<->CPU ping-pong floor, release/acquire", floors_ns[0] / 1e3, "us"),
        Row::new("GPU<->CPU ping-pong floor, plain", floors_ns[1] / 1e3, "us"),
    ]
}

/// The blocking put against the ping-pong floor on its own CQ slots (ns).
pub fn floor_on_cq(put_ns: f64, floor_ns: f64) -> Row {
    Row::new("8 B blocking put + completion, against the floor on its own CQ slots", put_ns / 1e3, "us").floor(
        floor_ns / 1e3,
        "us",
        "GPU<->CPU ping-pong, the pong in the slots the put's CQEs used, the faster flavour",
        put_ns / floor_ns,
        MEASURED_OVER_FLOOR,
    )
}

/// The put with many QPs on the engine over the same put with one: idle
/// QPs may cost the busy one a little of its engine's attention, no more.
pub const ENGINE_QPS_TARGET: Target = Target::AtMost(1.1);

/// The put with `n` QPs on the engine against the same put with one (ns).
pub fn engine_qps(n: usize, put_ns: f64, one_qp_ns: f64) -> Row {
    Row::new(format!("8 B blocking put, {n} QP(s) on the engine"), put_ns / 1e3, "us")
        .floor(one_qp_ns / 1e3, "us", "the same put with 1 QP on the engine", put_ns / one_qp_ns, MEASURED_OVER_FLOOR)
        .target(ENGINE_QPS_TARGET)
}

/// The post profile: the floor, then each protocol step against it (ns per post).
pub fn post_profile(prof: [u64; 6]) -> Vec<Row> {
    let floor = prof[0] as f64;
    let mut rows =
        vec![Row::new("post profile, 1 thread: floor (the same stores and fences, no protocol)", floor, "ns/post")];
    let steps = [
        "+ atomic add",
        "+ ready chain (relaxed store)",
        "store a release",
        "+ snapshots",
        "release before the doorbell record instead",
    ];
    for (step, ns) in steps.iter().zip(&prof[1..]) {
        let ns = *ns as f64;
        rows.push(Row::new(format!("post profile, 1 thread: {step}"), ns, "ns/post").floor(
            floor,
            "ns/post",
            "the same stores and fences, no protocol",
            ns / floor,
            MEASURED_OVER_FLOOR,
        ));
    }
    rows
}

/// (a) the posting rate of one launch shape against its store floor (/s);
/// `rings` is the text's note on how often the floor rings; `target`,
/// [`posting_target`]'s for the shape.
pub fn posting(exclusive: bool, label: &str, rings: &str, rate: f64, floor: f64, target: Target) -> Row {
    Row::new(format!("(a) 8 B put_nbi posting, {} channel, {label}", channel(exclusive)), rate, "puts/s")
        .floor(floor, "puts/s", format!("{STORE_FLOOR}{rings}, no protocol"), rate / floor, MEASURED_OVER_FLOOR)
        .target(target)
}

/// (d) put bandwidth against cuMemcpy (bytes/s).
pub fn put_bandwidth(len: usize, iters: u32, bw: f64, floor: f64) -> Row {
    Row::new(format!("(d) put {} KiB x {iters}", len >> 10), bw / 1e9, "GB/s").floor(
        floor / 1e9,
        "GB/s",
        MEMCPY_FLOOR,
        bw / floor,
        MEASURED_OVER_FLOOR,
    )
}

/// (c) compute -> put rounds (ns per round): GPU-initiated against
/// CPU-initiated, whose ratio is the text's CPU/GPU; then the GPU round's parts.
pub fn compute_loop(work: u32, gpu_ns: f64, cpu_ns: f64, compute_ns: f64, post_ns: f64) -> Vec<Row> {
    let round = format!("(c) compute({work}) -> 8 B put_nbi, per round, quiet at the end");
    vec![
        Row::new(format!("{round}: GPU-initiated"), gpu_ns / 1e3, "us")
            .floor(cpu_ns / 1e3, "us", CPU_INITIATED, cpu_ns / gpu_ns, FLOOR_OVER_MEASURED)
            .target(Target::AtLeast(8.0)),
        Row::new(format!("{round}: GPU-initiated, compute"), compute_ns / 1e3, "us"),
        Row::new(format!("{round}: GPU-initiated, result store and post"), post_ns / 1e3, "us"),
    ]
}

/// `bench p2p`'s 8 B round trip (ns): the API against plain stores and loads.
pub fn p2p_round_trip(api_ns: f64, floor_ns: f64) -> Row {
    Row::new("p2p 8 B round trip: marrow p + wait_until_ge", api_ns / 1e3, "us")
        .floor(floor_ns / 1e3, "us", "plain peer stores and loads", api_ns / floor_ns, MEASURED_OVER_FLOOR)
        .target(Target::AtMost(1.2))
}

/// `bench p2p`'s put bandwidth (GB/s); the target only from 1 MiB, as the text.
pub fn p2p_bandwidth(len: u64, label: &str, grid: (u32, u32), bw: f64, floor: f64) -> Row {
    let row = Row::new(format!("p2p put bandwidth {len} B ({label}, grid {} x {})", grid.0, grid.1), bw, "GB/s").floor(
        floor,
        "GB/s",
        COPY_ENGINE,
        bw / floor,
        MEASURED_OVER_FLOOR,
    );
    if len >= 1 << 20 { row.target(Target::AtLeast(0.95)) } else { row }
}

/// `bench p2p --sweep`'s launch shapes (GB/s).
pub fn p2p_sweep(len: u64, grid: (u32, u32), bw: f64, floor: f64) -> Row {
    Row::new(format!("sweep {len} B grid {} x {}", grid.0, grid.1), bw, "GB/s").floor(
        floor,
        "GB/s",
        COPY_ENGINE,
        bw / floor,
        MEASURED_OVER_FLOOR,
    )
}

/// What `bench gpu --doca` compares marrow with.
pub const DOCA_PEER: &str = "DOCA GPUNetIO's device verbs (NCCL 2.28's headers) on the same softnic";

/// marrow's blocking 8 B put against DOCA's put and CQ poll (us, the
/// medians of the best runs): at most DOCA's time.
pub fn doca_latency(mode: &str, marrow_us: f64, doca_us: f64) -> Row {
    Row::new(format!("8 B blocking put + completion, {mode}, median, against DOCA"), marrow_us, "us")
        .floor(doca_us, "us", DOCA_PEER, marrow_us / doca_us, MEASURED_OVER_FLOOR)
        .target(Target::AtMost(1.0))
}

/// marrow's posting rate against DOCA's on the same launch shape (/s): at
/// least DOCA's.
pub fn doca_rate(label: &str, marrow: f64, doca: f64) -> Row {
    Row::new(format!("8 B posting, {label}, against DOCA"), marrow, "puts/s")
        .floor(doca, "puts/s", DOCA_PEER, marrow / doca, MEASURED_OVER_FLOOR)
        .target(Target::AtLeast(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure_report::{COLUMNS, Collect, FigureReport, csv, json};

    /// A `bench gpu` run's rows in the order `benchmarks` makes them, from
    /// synthetic figures (ns, /s, bytes/s as the GPU code has them).
    fn synthetic_run() -> FigureReport {
        let mut c = Collect::new("bench gpu", "NVIDIA H200 (sm_90)");
        c.section("shared");
        breakdown(false, 1.8, 199, [0.3, 1.2, 0.25]).into_iter().for_each(|r| c.add(r));
        blocking_put(false, 1900.0, [1500.0, 1400.0], 1.8, 1.4).into_iter().for_each(|r| c.add(r));
        compute_loop(100, 2000.0, 30000.0, 1500.0, 500.0).into_iter().for_each(|r| c.add(r));
        for (n, put) in [(1usize, 1900.0), (32, 2000.0), (256, 2300.0)] {
            c.section(format!("shared, {n} QP(s) on the engine"));
            c.add(engine_qps(n, put, 1900.0));
        }
        c.section("shared");
        post_profile([10, 25, 30, 32, 40, 31]).into_iter().for_each(|r| c.add(r));
        c.add(posting(false, "1 thread", "", 4.0e7, 4.5e7, posting_target(false, false, Posters::Thread, false)));
        c.add(put_bandwidth(1 << 20, 64, 20.0e9, 25.0e9));
        c.section("exclusive, lazy put_nbi doorbells");
        c.add(posting(
            true,
            "1 thread",
            ", fences and doorbell once per 32 WQEs as a lone lazy poster rings",
            9.0e7,
            1.0e8,
            posting_target(true, true, Posters::Thread, false),
        ));
        c.report
    }

    #[test]
    fn ratios_are_the_texts_arithmetic() {
        let put = &blocking_put(true, 1900.0, [1500.0, 1400.0], 1.8, 1.4)[0];
        // The text prints put_ns / min(floors) as the ratio, floor and put in us.
        assert_eq!(put.ratio, Some(1900.0 / 1400.0));
        assert_eq!((put.measured, put.floor), (1.9, Some(1.4)));
        assert_eq!((put.target.as_deref(), put.target_met), (Some("<= 1.1"), Some(false)));
        // The same ratio on a shared channel meets its looser target.
        let shared = &blocking_put(false, 1900.0, [1500.0, 1400.0], 1.8, 1.4)[0];
        assert_eq!((shared.target.as_deref(), shared.target_met), (Some("<= 1.7"), Some(true)));
        let on_cq = floor_on_cq(1900.0, 1250.0);
        assert_eq!((on_cq.measured, on_cq.floor, on_cq.ratio), (1.9, Some(1.25), Some(1900.0 / 1250.0)));
        let median = &blocking_put(true, 1900.0, [1500.0, 1400.0], 1.8, 1.4)[1];
        assert_eq!((median.measured, median.floor, median.ratio), (1.8, Some(1.4), Some(1.8 / 1.4)));
        let c = &compute_loop(100, 2000.0, 30000.0, 1500.0, 500.0)[0];
        assert_eq!((c.ratio, c.ratio_of.as_deref()), (Some(15.0), Some("floor / measured")));
        assert_eq!((c.target.as_deref(), c.target_met), (Some(">= 8"), Some(true)));
        let q = engine_qps(256, 2300.0, 1900.0);
        assert_eq!((q.ratio, q.target_met), (Some(2300.0 / 1900.0), Some(false)));
        let a = posting(true, "1 warp", "", 4.0e7, 4.5e7, posting_target(true, false, Posters::Warp, false));
        assert_eq!(a.figure, "(a) 8 B put_nbi posting, exclusive channel, 1 warp");
        assert_eq!((a.ratio, a.target.as_deref(), a.target_met), (Some(4.0e7 / 4.5e7), Some(">= 0.9"), Some(false)));
        let d = put_bandwidth(64 << 20, 1, 10e9, 20e9);
        assert_eq!(
            (d.figure.as_str(), d.measured, d.ratio, d.target.as_deref()),
            ("(d) put 65536 KiB x 1", 10.0, Some(0.5), None)
        );
        let p = post_profile([10, 25, 30, 32, 40, 31]);
        assert_eq!(p.len(), 6);
        assert_eq!((p[0].floor, p[1].ratio, p[5].measured), (None, Some(2.5), 31.0));
    }

    #[test]
    fn each_posting_shape_has_its_own_target() {
        let t = |exclusive, posters, warp_put| posting_target(exclusive, false, posters, warp_put).text();
        let one_gpu = Posters::WholeGpu { channels: 1 };
        assert_eq!(t(false, Posters::Thread, false), ">= 0.7");
        assert_eq!(t(false, Posters::Warp, true), ">= 0.7");
        assert_eq!(t(false, one_gpu, false), ">= 0.25");
        assert_eq!(t(false, one_gpu, true), ">= 1");
        assert_eq!(t(false, Posters::WholeGpu { channels: 32 }, false), ">= 0.8");
        for posters in [Posters::Thread, Posters::Warp, one_gpu] {
            assert_eq!(t(true, posters, false), ">= 0.9");
            for exclusive in [false, true] {
                assert_eq!(posting_target(exclusive, true, posters, false).text(), ">= 0.8", "lazy doorbells");
            }
        }
        // The row says whether its ratio meets the target it was given.
        let whole = posting(false, "whole GPU", "", 3.0e7, 1.0e8, posting_target(false, false, one_gpu, false));
        assert_eq!(whole.target_met, Some(true));
        let warp =
            posting(false, "whole GPU, put_nbi_warp", "", 9.9e7, 1.0e8, posting_target(false, false, one_gpu, true));
        assert_eq!(warp.target_met, Some(false));
    }

    #[test]
    fn p2p_rows_follow_the_text() {
        let rt = p2p_round_trip(2400.0, 2000.0);
        assert_eq!((rt.measured, rt.floor, rt.ratio, rt.target_met), (2.4, Some(2.0), Some(1.2), Some(true)));
        // Below 1 MiB the text names no target, and neither does the row.
        let small = p2p_bandwidth(64 << 10, "thread stores", (1, 512), 100.0, 200.0);
        assert_eq!((small.target.as_deref(), small.target_met), (None, None));
        let big = p2p_bandwidth(16 << 20, "TMA bulk stores", (256, 512), 190.0, 200.0);
        assert_eq!(big.figure, "p2p put bandwidth 16777216 B (TMA bulk stores, grid 256 x 512)");
        assert_eq!((big.target.as_deref(), big.target_met), (Some(">= 0.95"), Some(true)));
        let s = p2p_sweep(256 << 20, (2112, 256), 150.0, 200.0);
        assert_eq!((s.ratio, s.floor_name.as_deref()), (Some(0.75), Some(COPY_ENGINE)));
    }

    #[test]
    fn a_synthetic_run_reads_back_from_json_and_csv() {
        let r = synthetic_run();
        let back: FigureReport = serde_json::from_str(&json(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&json(&r).unwrap()).unwrap();
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), r.rows.len());
        let sections: Vec<&str> = rows.iter().map(|x| x["section"].as_str().unwrap()).collect();
        assert_eq!(sections[0], "shared");
        assert!(sections.contains(&"shared, 32 QP(s) on the engine"));
        assert_eq!(*sections.last().unwrap(), "exclusive, lazy put_nbi doorbells");
        // Every target row says whether it is met; no row without a target does.
        for row in rows {
            assert_eq!(row["target"].is_null(), row["target_met"].is_null(), "{row}");
            assert_eq!(row["floor"].is_null(), row["ratio"].is_null(), "{row}");
        }
        let text = csv(&r).unwrap();
        let mut rd = ::csv::Reader::from_reader(text.as_bytes());
        assert_eq!(rd.headers().unwrap().iter().collect::<Vec<_>>(), COLUMNS);
        let recs: Vec<::csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(recs.len(), r.rows.len());
        for (rec, row) in recs.iter().zip(&r.rows) {
            assert_eq!((&rec[0], &rec[1]), (row.section.as_str(), row.figure.as_str()));
            assert_eq!(rec[2].parse::<f64>().unwrap(), row.measured);
            assert_eq!(&rec[3], row.measured_unit);
            assert_eq!(rec[4].parse::<f64>().ok(), row.floor);
            assert_eq!(&rec[5], row.floor_unit.as_deref().unwrap_or(""));
            assert_eq!(&rec[6], row.floor_name.as_deref().unwrap_or(""));
            assert_eq!(rec[7].parse::<f64>().ok(), row.ratio);
            assert_eq!(&rec[8], row.ratio_of.as_deref().unwrap_or(""));
            assert_eq!(&rec[9], row.target.as_deref().unwrap_or(""));
            assert_eq!(rec[10].parse::<bool>().ok(), row.target_met);
        }
    }

    #[test]
    fn doca_rows_hold_marrow_to_doca() {
        // Latency: marrow's time over DOCA's, at most 1.
        let l = doca_latency("exclusive", 2.82, 2.40);
        assert_eq!((l.measured, l.floor), (2.82, Some(2.40)));
        assert!((l.ratio.unwrap() - 1.175).abs() < 1e-3);
        assert_eq!(l.target_met, Some(false));
        assert_eq!(doca_latency("shared", 3.52, 3.90).target_met, Some(true));
        // Rates: marrow's over DOCA's, at least 1.
        let r = doca_rate("1 warp", 2.0e7, 2.5e7);
        assert!((r.ratio.unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(r.target_met, Some(false));
        assert_eq!(doca_rate("whole GPU", 1.9e8, 2.6e7).target_met, Some(true));
    }
}
