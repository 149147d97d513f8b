//! Binding an index to what a replay reads, before anything is fetched:
//! the checks that need no network (the topic and partition the index
//! records, the first offset it covers, its region rule, regions it does
//! not list, [`check_listed`], which the recovery builder runs). The topic id and the log's end are checked by the driver
//! that looks them up (`walfetch::consumer::RecoveryBuilder::build`); each
//! entry read at an indexed offset is checked as it is yielded.

use crate::error::Mismatch;
use crate::index::{IdFormat, RegionRule, WalIndex};

use super::{RegionRange, ReplayOptions, StrategyKind};

/// The rule a replay goes by, and whether entries read at indexed offsets
/// are checked with it.
#[derive(Debug)]
pub(super) struct Bound {
    /// The rule for records past `last_index` and for a scan: the one
    /// given, else the index's, else the key read big-endian.
    pub(super) rule: RegionRule,
    /// Set when the rule is known (given or recorded in the index): every
    /// indexed entry must then be of its region by it.
    pub(super) verify: bool,
}

/// Checks that `index` records `topic`/`partition` (or nothing).
#[doc(hidden)]
pub fn check_target(topic: &str, partition: i32, index: &WalIndex) -> Result<(), Mismatch> {
    let source = index.source();
    if let Some(indexed) = source.topic.as_ref().filter(|t| t.as_str() != topic) {
        return Err(Mismatch::Topic {
            indexed: indexed.clone(),
        });
    }
    if let Some(indexed) = source.partition.filter(|p| *p != partition) {
        return Err(Mismatch::Partition { indexed });
    }
    Ok(())
}

/// Checks `index` against a replay of `regions` of `topic`/`partition`.
pub(super) fn bind(
    topic: &str,
    partition: i32,
    index: &WalIndex,
    regions: &[RegionRange],
    options: &ReplayOptions,
) -> Result<Bound, Mismatch> {
    check_target(topic, partition, index)?;
    let source = index.source();
    let rule = match (&options.region_rule, &source.rule) {
        (Some(given), Some(indexed)) if given != indexed && !options.force_rule => {
            return Err(Mismatch::Rule {
                indexed: indexed.clone(),
                given: given.clone(),
            })
        }
        (Some(given), _) => given.clone(),
        (None, Some(indexed)) => indexed.clone(),
        (None, None) => RegionRule::Key(IdFormat::BigEndian),
    };
    let verify = options.region_rule.is_some() || source.rule.is_some();
    if options.strategy == StrategyKind::Scan {
        // A scan reads every record of the range and needs no index.
        return Ok(Bound { rule, verify });
    }
    for r in regions.iter().filter(|r| r.from < r.to) {
        if let Some(first_offset) = source.first_offset.filter(|f| r.from < *f) {
            return Err(Mismatch::BeforeFirstOffset {
                region: r.region,
                from: r.from,
                first_offset,
            });
        }
    }
    Ok(Bound { rule, verify })
}

/// A region the index does not list: an error when the replay reads only
/// offsets the index covers (the region has nothing there, or its id or
/// the index is wrong), a `tracing` warning when it reads past
/// `last_index` too (the records there are picked out by the rule). Not
/// part of the core's own checks: a core may be asked for regions that
/// wrote nothing; a recovery of a region that is not in its index is
/// refused (`walfetch::consumer::RecoveryBuilder::build`).
#[doc(hidden)]
pub fn check_listed(
    topic: &str,
    partition: i32,
    index: &WalIndex,
    regions: &[RegionRange],
) -> Result<(), Mismatch> {
    let last_index = index.last_index();
    for r in regions.iter().filter(|r| r.from < r.to) {
        if index.region(r.region).is_some() {
            continue;
        }
        match last_index {
            Some(l) if r.to <= l.saturating_add(1) => {
                return Err(Mismatch::RegionAbsent {
                    region: r.region,
                    last_index,
                })
            }
            _ => tracing::warn!(
                topic,
                partition,
                region = r.region,
                last_index,
                "the region has no entry in the index: only the log past last_index is read for it"
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexEntry, IndexSource};

    fn index() -> WalIndex {
        let mut index = WalIndex::new();
        index.push(1, IndexEntry::offset_only(10)).unwrap();
        index.set_last_index(20);
        index.set_source(
            IndexSource::new("wal", 0)
                .with_first_offset(10)
                .with_rule(RegionRule::Key(IdFormat::Decimal)),
        );
        index
    }

    fn range(region: u64, from: i64, to: i64) -> RegionRange {
        RegionRange { region, from, to }
    }

    fn check(
        topic: &str,
        partition: i32,
        r: RegionRange,
        o: &ReplayOptions,
    ) -> Result<Bound, Mismatch> {
        bind(topic, partition, &index(), &[r], o)
    }

    #[test]
    fn another_topic_or_partition_is_a_mismatch() {
        let o = ReplayOptions::default();
        assert_eq!(
            check("other", 0, range(1, 10, 30), &o).unwrap_err(),
            Mismatch::Topic {
                indexed: "wal".into()
            }
        );
        assert_eq!(
            check("wal", 1, range(1, 10, 30), &o).unwrap_err(),
            Mismatch::Partition { indexed: 0 }
        );
        assert!(check("wal", 0, range(1, 10, 30), &o).is_ok());
    }

    #[test]
    fn the_stored_rule_is_the_default_and_another_needs_force() {
        let o = ReplayOptions::default();
        let bound = check("wal", 0, range(1, 10, 30), &o).unwrap();
        assert_eq!(bound.rule, RegionRule::Key(IdFormat::Decimal));
        assert!(bound.verify);
        let other = o
            .clone()
            .with_region_rule(RegionRule::Key(IdFormat::BigEndian));
        let err = check("wal", 0, range(1, 10, 30), &other).unwrap_err();
        assert!(matches!(err, Mismatch::Rule { .. }), "{err}");
        assert!(
            err.to_string().contains("key, be") && err.to_string().contains("key, decimal"),
            "{err}"
        );
        let forced = other.with_force_rule(true);
        let bound = check("wal", 0, range(1, 10, 30), &forced).unwrap();
        assert_eq!(bound.rule, RegionRule::Key(IdFormat::BigEndian));
        // An index that records no rule: the default, nothing verified.
        let bare = bind("wal", 0, &WalIndex::new(), &[range(1, 0, 5)], &o).unwrap();
        assert!(!bare.verify);
    }

    #[test]
    fn a_replay_from_below_the_first_offset_is_a_mismatch() {
        let o = ReplayOptions::default();
        let err = check("wal", 0, range(1, 9, 30), &o).unwrap_err();
        assert_eq!(
            err,
            Mismatch::BeforeFirstOffset {
                region: 1,
                from: 9,
                first_offset: 10
            }
        );
        // A scan needs no index.
        let scan = o.with_strategy(StrategyKind::Scan);
        assert!(check("wal", 0, range(1, 9, 30), &scan).is_ok());
    }

    #[test]
    fn a_region_absent_from_the_index_is_a_mismatch_unless_the_tail_may_hold_it() {
        let listed = |r| check_listed("wal", 0, &index(), &[r]);
        assert_eq!(
            listed(range(2, 10, 21)).unwrap_err(),
            Mismatch::RegionAbsent {
                region: 2,
                last_index: Some(20)
            }
        );
        assert!(listed(range(1, 10, 21)).is_ok());
        // Offsets past last_index (20) are scanned: they may hold it.
        assert!(listed(range(2, 10, 22)).is_ok());
        // An empty range asks for nothing.
        assert!(listed(range(2, 12, 12)).is_ok());
        // An index complete up to nothing: everything is past it.
        assert!(check_listed("wal", 0, &WalIndex::new(), &[range(2, 0, 5)]).is_ok());
    }
}
