//! The ways a restart recovers every region, and what each one needs.

use serde::Serialize;
use walfetch::consumer::StrategyKind;

use super::*;

/// A way to recover every region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub(crate) enum RestartContender {
    /// walfetch's [`Consumer`] per region, one after another, with hints.
    Regions,
    /// The estimate strategy per region, one after another, offsets only.
    EstimateRegions,
    /// The same, [`GREPTIMEDB_PARALLELISM`] regions at a time: GreptimeDB's
    /// restart.
    EstimateGreptime,
    /// One scan of each partition, split by the region rule.
    ScanOnce,
    /// walfetch's [`Recovery`]: every region in one pass, with hints.
    OnePass,
    /// [`RestartContender::OnePass`] planning the fewest bytes (a cost
    /// model whose fetches cost nothing: runs never merge).
    OnePassFewestBytes,
}

impl RestartContender {
    pub(super) const ALL: [RestartContender; 6] = [
        RestartContender::Regions,
        RestartContender::EstimateRegions,
        RestartContender::EstimateGreptime,
        RestartContender::ScanOnce,
        RestartContender::OnePass,
        RestartContender::OnePassFewestBytes,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            RestartContender::Regions => "walfetch, region by region",
            RestartContender::EstimateRegions => "estimate, region by region",
            RestartContender::EstimateGreptime => "estimate, 16 regions at a time",
            RestartContender::ScanOnce => "scan, one pass",
            RestartContender::OnePass => "walfetch, one pass",
            RestartContender::OnePassFewestBytes => "walfetch, one pass, fewest bytes",
        }
    }

    /// Its name in the tables: "+ back-off" on the estimate where it needs
    /// walfetch's back-off to finish (see `Contender::label`), "(offsets
    /// only)" on walfetch's where it recovers with an index of offsets only.
    pub(super) fn label(self, kafka_rules: bool, offsets_only: bool) -> String {
        match self {
            RestartContender::EstimateRegions | RestartContender::EstimateGreptime
                if !kafka_rules =>
            {
                self.name().replacen("estimate", "estimate + back-off", 1)
            }
            _ if offsets_only && self.strategy() == StrategyKind::Index => {
                format!("{} (offsets only)", self.name())
            }
            _ => self.name().to_owned(),
        }
    }

    /// How many regions it replays at once, region by region.
    pub(super) fn at_once(self) -> usize {
        match self {
            RestartContender::EstimateGreptime => GREPTIMEDB_PARALLELISM,
            _ => 1,
        }
    }

    /// Whether it is walfetch's (region by region or in one pass).
    pub(super) fn is_walfetch(self) -> bool {
        matches!(
            self,
            RestartContender::Regions
                | RestartContender::OnePass
                | RestartContender::OnePassFewestBytes
        )
    }

    /// Whether it recovers every region in one pass.
    pub(super) fn one_pass(self) -> bool {
        matches!(
            self,
            RestartContender::ScanOnce
                | RestartContender::OnePass
                | RestartContender::OnePassFewestBytes
        )
    }

    pub(super) fn strategy(self) -> StrategyKind {
        match self {
            RestartContender::Regions
            | RestartContender::OnePass
            | RestartContender::OnePassFewestBytes => StrategyKind::Index,
            RestartContender::EstimateRegions | RestartContender::EstimateGreptime => {
                StrategyKind::Estimate
            }
            RestartContender::ScanOnce => StrategyKind::Scan,
        }
    }
}
