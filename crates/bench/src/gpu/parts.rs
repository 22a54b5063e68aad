//! Which of `marrow bench gpu`'s measurements run (`--only`): all of them
//! by default, or some, so that an A/B run of one figure (a device-code
//! knob through `MARROW_NVRTC_DEFINE`, say) spends its device time on that
//! figure alone. The checks `demo --gpu` runs are not parts: the bench
//! times, the demo checks.

/// One kind of measurement, in every channel configuration that has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The 8 B blocking put against the GPU<->CPU ping-pong floor, with
    /// its traced breakdown: (b).
    Latency,
    /// The same put with 32 and 256 QPs on the engine, against one.
    Qps,
    /// Posting rates against the store floor, and put bandwidth: (a), (d).
    Rates,
    /// compute -> put -> compute against the CPU-initiated loop: (c).
    Loop,
}

impl Part {
    /// Every part, in the order the bench runs them; and the names `--only` takes.
    pub const ALL: [(Part, &'static str); 4] =
        [(Part::Latency, "latency"), (Part::Qps, "qps"), (Part::Rates, "rates"), (Part::Loop, "loop")];

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts(u8);

impl Parts {
    /// Everything: the bench without `--only`.
    pub fn all() -> Parts {
        Parts(Part::ALL.iter().fold(0, |b, (p, _)| b | p.bit()))
    }

    /// Whether `p` runs.
    pub fn has(self, p: Part) -> bool {
        self.0 & p.bit() != 0
    }

    /// A comma-separated list of part names (`latency,qps`); an unknown or
    /// empty name is an error naming the ones there are.
    pub fn parse(list: &str) -> Result<Parts, String> {
        let names = || Part::ALL.map(|(_, n)| n).join(", ");
        let mut set = 0;
        for name in list.split(',').map(str::trim) {
            let (p, _) = Part::ALL
                .iter()
                .find(|(_, n)| *n == name)
                .ok_or_else(|| format!("{name:?} is not a part of bench gpu (the parts: {})", names()))?;
            set |= p.bit();
        }
        Ok(Parts(set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_selects_its_parts_and_nothing_else() {
        let p = Parts::parse("latency, loop").unwrap();
        assert!(p.has(Part::Latency) && p.has(Part::Loop));
        assert!(!p.has(Part::Qps) && !p.has(Part::Rates));
        assert_eq!(Parts::parse("rates").unwrap(), Parts::parse("rates,rates").unwrap());
    }

    #[test]
    fn all_has_every_part() {
        assert!(Part::ALL.iter().all(|(p, _)| Parts::all().has(*p)));
        assert_eq!(Parts::parse("latency,qps,rates,loop").unwrap(), Parts::all());
    }

    #[test]
    fn an_unknown_or_empty_name_is_refused_with_the_names() {
        for bad in ["latncy", "", "latency,", "rates,,loop"] {
            let e = Parts::parse(bad).unwrap_err();
            assert!(e.contains("latency, qps, rates, loop"), "{bad:?}: {e}");
        }
    }
}
