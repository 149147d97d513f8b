//! The properties, over random scenarios: every region exactly its records, one pass no dearer, faults lose nothing.

use crate::common::*;

proptest! {
    #![proptest_config(config(768))]

    /// Every region gets exactly its records, in one pass and alone.
    #[test]
    fn every_region_gets_exactly_its_records(s in scenario()) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let one_pass = s.sim(&log).run(&index, &ranges, s.options());
        assert_exact(&log, &ranges, &one_pass)?;
        for r in &ranges {
            let alone = s.sim(&log).run(&index, std::slice::from_ref(r), s.options());
            assert_exact(&log, std::slice::from_ref(r), &alone)?;
            if matches!(s.last_index, LastIndex::Complete) {
                let entries = log.expected(r).len() as u64;
                prop_assert!(
                    alone.stats.fetches <= 4 * entries + 20,
                    "{} fetches for {} entries",
                    alone.stats.fetches,
                    entries
                );
            }
        }
    }

    /// One pass costs no more than replaying each region alone, at the
    /// price the planner puts on a fetch: record bytes, plus the fetches
    /// times the bytes the cost model trades one for. (Not bytes alone:
    /// the planner reads a few bytes of another region's batch to save a
    /// fetch, which a region alone does not; and with fetches free, its
    /// runs are built left to right, not searched for the cheapest split.)
    #[test]
    fn one_pass_costs_no_more_than_region_by_region(s in planned_for()) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let price = fetch_price(s.in_flight);
        let cost = |o: &Outcome| o.stats.records_bytes + o.stats.fetches * price;
        let one_pass = s.sim(&log).run(&index, &ranges, s.options());
        assert_exact(&log, &ranges, &one_pass)?;
        let mut alone_cost = 0;
        for r in &ranges {
            let alone = s.sim(&log).run(&index, std::slice::from_ref(r), s.options());
            alone_cost += cost(&alone);
        }
        prop_assert!(
            cost(&one_pass) <= alone_cost,
            "one pass {} bytes in {} fetches, region by region {} at {} a fetch",
            one_pass.stats.records_bytes,
            one_pass.stats.fetches,
            alone_cost,
            price
        );
    }

    /// Responses cut at any byte, spurious `OFFSET_OUT_OF_RANGE` answers
    /// and answers from replicas whose high watermark lags cost fetches,
    /// never records.
    #[test]
    fn cut_responses_spurious_out_of_range_and_lagging_replicas_lose_nothing(
        s in scenario(),
        truncate in 0.0f64..0.3,
        spurious in 0.0f64..0.2,
        lagging in 0.0f64..0.3,
    ) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let faults = Faults {
            truncate,
            spurious_out_of_range: spurious,
            lagging,
            ..Faults::NONE
        };
        let out = s.sim(&log).faults(faults).run(&index, &ranges, s.options());
        assert_exact(&log, &ranges, &out)?;
    }

    /// A fetch that fails ends the replay with its error, after a prefix
    /// of each region's records and nothing else.
    #[test]
    fn a_failed_fetch_ends_the_replay_with_its_error(s in scenario(), at in 0usize..12) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let faults = Faults { error_at: Some(at), ..Faults::NONE };
        let out = s.sim(&log).faults(faults).run(&index, &ranges, s.options());
        for r in &ranges {
            let got = &out.regions[&r.region];
            let want = log.expected(r);
            prop_assert!(want.starts_with(got), "region {:?}: not a prefix", r);
        }
        if out.answers > at {
            match &out.error {
                Some(Error::Client(e)) => {
                    prop_assert_eq!(e.to_string(), injected_error().to_string());
                }
                other => prop_assert!(false, "ended with {:?}", other),
            }
        } else {
            assert_exact(&log, &ranges, &out)?;
        }
    }
}
