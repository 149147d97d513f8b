//! How often two wanted entries that follow each other share a batch, by
//! how many offsets lie between them and whether they are of one region:
//! what a planner without hints judges whether a fetch's later entries
//! arrive with its first batch from.
//!
//! A fetch whose first batch is unknown gets that batch whole whatever its
//! byte limit (KIP-74); the limit pays only for entries past it. Whether
//! the next wanted entry shares the batch depends on how the log was
//! written: always, where each region's records of a linger window form one
//! batch and the entries are adjacent offsets; rarely, where batches are
//! small and the entries far apart. Every response shows it for the
//! entries it delivered (each batch's header states its last offset), so it
//! is learned, per class of distance (1, 2–3, 4–7, …).
//!
//! Pairs of one region and pairs of two are learned apart. In a recovery
//! of many regions the wanted entries of one partition are the union of
//! theirs, and on a log written a region per batch (GreptimeDB's layout)
//! two adjacent offsets of two regions are never in one batch while two of
//! one region nearly always are; mixed together, the two would average to
//! a chance that fits neither. Where batches mix regions, both kinds learn
//! to share batches.

/// Counts of wanted-entry pairs seen, and of those in one batch, per class
/// of offset distance, for pairs of one region and of two.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbours {
    /// Pairs seen in one batch, by kind (two regions, one) and distance
    /// class.
    same: [[u32; CLASSES]; 2],
    /// Pairs seen, likewise.
    pairs: [[u32; CLASSES]; 2],
}

/// Distance classes: powers of two up to 2^63.
const CLASSES: usize = 64;

/// Weight of the prior, in pairs: how many seen pairs it is worth.
const PRIOR_WEIGHT: f64 = 2.0;

impl Default for Neighbours {
    fn default() -> Self {
        Self {
            same: [[0; CLASSES]; 2],
            pairs: [[0; CLASSES]; 2],
        }
    }
}

impl Neighbours {
    /// The class of a distance of `d` offsets (below 1 counts as 1).
    fn class(d: i64) -> usize {
        let d = u64::try_from(d).unwrap_or(0).max(1);
        (u64::BITS - 1 - d.leading_zeros()) as usize
    }

    /// Records one pair of wanted entries `d` offsets apart, of one region
    /// (`one_region`) or two, and whether the later one was in the earlier
    /// one's batch.
    pub fn observe(&mut self, d: i64, one_region: bool, same: bool) {
        let (k, c) = (usize::from(one_region), Self::class(d));
        self.pairs[k][c] = self.pairs[k][c].saturating_add(1);
        self.same[k][c] = self.same[k][c].saturating_add(u32::from(same));
    }

    /// The chance that an entry `d` offsets after another, of the same
    /// region (`one_region`) or not, shares its batch: the share of such
    /// pairs seen in one batch, starting from `prior` (weighted as two
    /// pairs) while few were seen.
    pub fn together(&self, d: i64, one_region: bool, prior: f64) -> f64 {
        let (k, c) = (usize::from(one_region), Self::class(d));
        (f64::from(self.same[k][c]) + PRIOR_WEIGHT * prior.clamp(0.0, 1.0))
            / (f64::from(self.pairs[k][c]) + PRIOR_WEIGHT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two() {
        assert_eq!(Neighbours::class(-3), 0);
        assert_eq!(Neighbours::class(1), 0);
        assert_eq!(Neighbours::class(2), 1);
        assert_eq!(Neighbours::class(3), 1);
        assert_eq!(Neighbours::class(4), 2);
        assert_eq!(Neighbours::class(i64::MAX), 62);
    }

    #[test]
    fn the_prior_gives_way_to_what_was_seen() {
        let mut n = Neighbours::default();
        assert!((n.together(1, true, 0.4) - 0.4).abs() < 1e-9);
        for _ in 0..20 {
            n.observe(1, true, true);
        }
        assert!(n.together(1, true, 0.0) > 0.9);
        // Another class learned nothing.
        assert!((n.together(5, true, 0.3) - 0.3).abs() < 1e-9);
        for _ in 0..40 {
            n.observe(6, true, false);
        }
        assert!(n.together(5, true, 1.0) < 0.1);
    }

    /// A region per batch: adjacent entries of one region share a batch,
    /// of two never; each kind keeps what it saw.
    #[test]
    fn pairs_of_one_region_and_of_two_are_learned_apart() {
        let mut n = Neighbours::default();
        for _ in 0..20 {
            n.observe(1, true, true);
            n.observe(1, false, false);
        }
        assert!(n.together(1, true, 0.5) > 0.9);
        assert!(n.together(1, false, 0.5) < 0.1);
    }
}
