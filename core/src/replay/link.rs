//! Learning what a fetch costs on this link, from the replay's own fetches.
//!
//! A broker answers the requests of one connection one at a time, in order
//! (Kafka mutes a connection while it serves a request), so the answers of
//! one broker form a first-in first-out queue. What a fetch costs in wall
//! time is then its *service time*: from when it was sent, or from the
//! previous answer if the broker was still busy then, to its own answer
//! (the departure-time identity of a FIFO server). The mean of the recent
//! fetches' costs beyond their bytes (at the prior's bandwidth), without
//! the dearest eighth, is the planner's per-fetch cost, with one fetch in
//! flight, since service times already include whatever pipelining hid.
//!
//! With several connections to a broker (`connections_per_broker`), their
//! answers interleave and the broker may serve some side by side; the same
//! identity, over all of a broker's answers, then measures what one more
//! fetch adds to the replay's time, which is what the planner weighs.
//!
//! A request that carries the fetches of several partitions (a recovery
//! sends the fetches ready for one broker together) is one service: each
//! of its fetches costs its share ([`LinkEstimator::observe_request`]), as
//! one fetch fewer in a partition saves that share of a request.
//!
//! The client's own work on an answer (decoding the records it wants) is
//! not the broker's: an answer that arrived while the client was busy is
//! served from when the client was done ([`LinkEstimator::processed`]).
//! That work is the same whatever the plan, so it must not make fetches
//! look dear.
//!
//! The plan prices a fetch at the larger of two figures. One is what the
//! fit measured, once enough answers came. The other is the fetch's share
//! of the link's round trip: a plan has at most the prior's `in_flight`
//! fetches on their way at once, so each costs at least that share of a
//! round trip, however cheap the broker. The round trip is the prior's,
//! or, learned from the very first answer (it found the broker idle), the
//! least time a request sent to an idle broker took, less a loopback round
//! trip (150 µs, the client's and the broker's own work on a request,
//! which the default prior stands for).
//! Where the measured cost is the larger, the plan prices a fetch at it,
//! one in flight (the service times already include what pipelining hid),
//! and the fetch counts as *dear* in [`LinkStats`]. Measured on loopback
//! (the restart bench, two cores shared with the broker): the Kafka-rules
//! broker 1–23 µs a fetch, Apache Kafka 4.4 20–130 µs, Tansu 0.6 1–4 ms.
//! Before, a fetch counted as dear only above a loopback round trip, and
//! Kafka's 20–130 µs were priced at the prior's 2.3 µs share: a restart of
//! GreptimeDB's layout on Kafka sent 978 fetches and took 1.23× the scan's
//! time (docs/planning.md).
//!
//! Pure: times are passed in.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::plan::{CostModel, LOOPBACK_ROUND_TRIP};

/// Fetches remembered for the fit.
const WINDOW: usize = 64;
/// Fetches sent while the broker was busy needed before the fit replaces
/// the prior (twice as many of any kind where the replay never keeps it
/// busy).
pub(crate) const MIN_SAMPLES: usize = 8;
/// Fetches in flight while no link is learned: one burst of them, sent
/// together after the replay's first answers, teaches the link (the first
/// of the burst finds the broker idle and does not count).
pub const LEARNING_IN_FLIGHT: usize = MIN_SAMPLES + 1;

/// What fetches to one broker have cost; see the module docs.
#[derive(Debug, Clone)]
pub struct LinkEstimator {
    prior: CostModel,
    /// The latest fetches: wire bytes, service seconds, and whether the
    /// broker was still busy with an earlier one when it was sent.
    samples: VecDeque<Sample>,
    last_answer: Option<Instant>,
    /// The least time a request sent to an idle broker took to come back:
    /// the link's round trip with the broker's least work, as the
    /// replay's first answer already shows it.
    idle_round_trip: Option<Duration>,
    /// What the samples show, worked out once per fetch observed.
    model: CostModel,
    /// The replay so far, for [`LinkEstimator::stats`]; `model` comes from
    /// its `measured_per_fetch`.
    history: LinkStats,
}

/// What a replay learned of one broker's link: its part of
/// [`super::ReplayStats::links`], to tell why a plan read through other
/// regions' batches, or did not. A request carrying several partitions'
/// fetches is one answer here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// Answers the link was learned from.
    pub answers: u64,
    /// What a fetch was measured to cost beyond its bytes after the latest
    /// answer: the mean over the latest fetches (at most 64) of the time
    /// the broker took to serve each beyond its bytes, without the dearest
    /// eighth. `None` until enough were seen, while the plan keeps the
    /// starting cost model.
    pub measured_per_fetch: Option<Duration>,
    /// The most it was measured to cost after any answer.
    pub dearest_per_fetch: Option<Duration>,
    /// Answers after which a fetch was dear (it cost more than its share of
    /// the link's round trip among the fetches in flight, see
    /// [`LinkEstimator`]): the plan then priced fetches at that cost and read
    /// through gaps to send fewer. Zero: every fetch counted as cheap, and
    /// the starting cost model held throughout.
    pub dear_answers: u64,
    /// The most bytes the plan would read rather than send one more fetch
    /// ([`CostModel::merge_gap_bytes`]), over the replay: the starting
    /// cost model's, or more where fetches were dear.
    pub widest_merge_gap_bytes: u64,
}

/// One answered fetch.
#[derive(Debug, Clone, Copy)]
struct Sample {
    bytes: f64,
    service: f64,
    busy: bool,
}

impl LinkEstimator {
    /// An estimator that answers `prior` until it has seen enough fetches.
    pub fn new(prior: CostModel) -> Self {
        Self {
            prior,
            samples: VecDeque::with_capacity(WINDOW),
            last_answer: None,
            idle_round_trip: None,
            model: prior,
            history: LinkStats {
                widest_merge_gap_bytes: prior.merge_gap_bytes(),
                ..LinkStats::default()
            },
        }
    }

    /// A fetch sent at `sent` was answered at `answered` with `bytes` on
    /// the wire. Answers must be reported in the order they arrived.
    pub fn observe(&mut self, sent: Instant, answered: Instant, bytes: u64) {
        self.observe_request(sent, answered, bytes, 1);
    }

    /// A request carrying `fetches` fetches (for as many partitions) was
    /// sent at `sent` and answered at `answered`, with `bytes` on the wire
    /// for them all. Each fetch costs its share of the request's service
    /// time: the planner prices one partition's fetch, and the fetches of
    /// the partitions replayed side by side travel together, so one fetch
    /// fewer in a partition saves that share of a request, not a whole one.
    pub fn observe_request(
        &mut self,
        sent: Instant,
        answered: Instant,
        bytes: u64,
        fetches: usize,
    ) {
        let share = fetches.max(1) as f64;
        let busy = self.last_answer.is_some_and(|last| last > sent);
        if !busy {
            let took = answered.saturating_duration_since(sent);
            self.idle_round_trip = Some(self.idle_round_trip.map_or(took, |rt| rt.min(took)));
        }
        let began = self.last_answer.map_or(sent, |last| last.max(sent));
        let service = answered.saturating_duration_since(began).as_secs_f64() / share;
        self.last_answer = Some(self.last_answer.map_or(answered, |l| l.max(answered)));
        if self.samples.len() == WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            bytes: bytes as f64 / share,
            service,
            busy,
        });
        let measured = self.fit().map(Duration::from_secs_f64);
        self.history.measured_per_fetch = measured;
        let dear = self.dear();
        self.model = self.model_now(dear);
        let history = &mut self.history;
        history.answers += 1;
        history.dearest_per_fetch = history.dearest_per_fetch.max(measured);
        history.dear_answers += u64::from(dear.is_some());
        history.widest_merge_gap_bytes = history
            .widest_merge_gap_bytes
            .max(self.model.merge_gap_bytes());
    }

    /// The cost model the planner plans with now (see the module docs):
    /// the `dear` fetch's measured cost ([`LinkEstimator::dear`]), one in
    /// flight, or the prior with the link's round trip as known.
    fn model_now(&self, dear: Option<Duration>) -> CostModel {
        match dear {
            Some(per_fetch) => CostModel {
                round_trip: per_fetch,
                bytes_per_second: self.prior.bytes_per_second,
                in_flight: 1,
            },
            None => CostModel {
                round_trip: self.round_trip(),
                ..self.prior
            },
        }
    }

    /// The link's round trip: the prior's, or the least an idle broker
    /// took to answer, less a loopback round trip (which the cheap prior
    /// already stands for), where that is more.
    fn round_trip(&self) -> Duration {
        let prior = self.prior.round_trip;
        self.idle_round_trip.map_or(prior, |rt| {
            rt.saturating_sub(LOOPBACK_ROUND_TRIP).max(prior)
        })
    }

    /// The measured cost of a fetch where it is dear: more than its share
    /// of the link's round trip among the prior's fetches in flight.
    fn dear(&self) -> Option<Duration> {
        let in_flight = u32::try_from(self.prior.in_flight.max(1)).unwrap_or(u32::MAX);
        let share = self.round_trip() / in_flight;
        self.history
            .measured_per_fetch
            .filter(|&per_fetch| per_fetch > share)
    }

    /// The client finished taking in the latest answer at `at`: an answer
    /// that waited for it meanwhile cost the broker nothing more.
    pub fn processed(&mut self, at: Instant) {
        self.last_answer = Some(self.last_answer.map_or(at, |l| l.max(at)));
    }

    /// Whether enough fetches were seen for the fit to replace the prior.
    pub fn learned(&self) -> bool {
        self.history.measured_per_fetch.is_some()
    }

    /// What was learned so far, for the replay's stats.
    pub fn stats(&self) -> LinkStats {
        self.history
    }

    /// Fetches observed so far (at most the window).
    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// The cost model the fetches seen so far show, or the prior before
    /// there are enough of them.
    pub fn cost_model(&self) -> CostModel {
        self.model
    }

    /// What a fetch costs beyond its bytes, in seconds, as the samples
    /// show it, once there are enough of them. While the replay keeps the
    /// broker busy, only the fetches sent while it was busy count: one
    /// sent to an idle broker waited for the whole round trip, which the
    /// fetches in flight share (the first fetches of a replay, sent before
    /// any answer, would make a pipelined broker look dear). A replay that
    /// never keeps it busy (one fetch at a time) pays each fetch's wait,
    /// and learns from all of them, once it has twice as many.
    fn fit(&self) -> Option<f64> {
        let busy = self.samples.iter().filter(|s| s.busy).count();
        let only_busy = if busy >= MIN_SAMPLES {
            true
        } else if self.samples.len() >= 2 * MIN_SAMPLES {
            false
        } else {
            return None;
        };
        // The time beyond each fetch's bytes, at the prior's bandwidth:
        // the link's bandwidth is what the bytes of a gap cost, and the
        // service times cannot tell it from the client's own work on the
        // bytes it wants. Their mean without the dearest eighth: a few
        // answers held up by something else (the client's scheduler, a
        // pause, the in-process broker's share of the cores) do not make
        // every fetch look dear. Not their median: a broker that answers
        // in bursts (several connections served side by side, or Tansu
        // 0.6 answering two at a time) has a service time near zero for
        // most answers of a burst and the whole burst's for one, and the
        // median of such a window can fall on either side of the bound
        // below from one replay to the next.
        let per_byte = 1.0 / self.prior.bytes_per_second.max(1.0);
        // Worked out after every answer: on the stack, and the dearest
        // selected out rather than the window sorted.
        let mut beyond = [0.0f64; WINDOW];
        let mut n = 0;
        for s in self.samples.iter().filter(|s| s.busy || !only_busy) {
            beyond[n] = s.service - per_byte * s.bytes;
            n += 1;
        }
        // At least MIN_SAMPLES here, so at least one is dropped.
        let keep = n - n / 8;
        if keep < n {
            beyond[..n].select_nth_unstable_by(keep, f64::total_cmp);
        }
        Some((beyond[..keep].iter().sum::<f64>() / keep as f64).max(1e-6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_per_fetch_cost_at_the_priors_bandwidth() {
        // A link of 1 ms a fetch at the prior's 1.5 GB/s, fetches one after
        // another.
        let prior = CostModel::default();
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        let mut at = t0;
        for k in 0..20u64 {
            let bytes = 10_000 + 30_000 * (k % 4);
            let took = Duration::from_secs_f64(1e-3 + bytes as f64 / 1.5e9);
            link.observe(at, at + took, bytes);
            at += took + Duration::from_micros(50);
        }
        let model = link.cost_model();
        assert!(
            (model.round_trip.as_secs_f64() - 1e-3).abs() < 1e-5,
            "{model:?}"
        );
        assert_eq!(model.bytes_per_second, prior.bytes_per_second);
        assert_eq!(model.in_flight, 1);
    }

    #[test]
    fn pipelined_fetches_cost_their_service_time_not_their_wait() {
        // Four fetches sent at once to a broker serving each in 2 ms: each
        // waited for the ones before it, but each cost 2 ms.
        let mut link = LinkEstimator::new(CostModel::default());
        let t0 = Instant::now();
        for round in 0..4u32 {
            let sent = t0 + Duration::from_millis(8) * round;
            for k in 1..=4u32 {
                link.observe(sent, sent + Duration::from_millis(2) * k, 1000);
            }
        }
        let model = link.cost_model();
        let per_fetch = model.round_trip.as_secs_f64();
        assert!((per_fetch - 2e-3).abs() < 1e-4, "{model:?}");
    }

    #[test]
    fn a_fetch_cheaper_than_the_priors_round_trip_keeps_the_prior() {
        // 20 µs a fetch, pipeline full: cheaper than the prior's 150 µs
        // round trip, so the prior's share-of-a-round-trip price stays.
        let prior = CostModel::default();
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        for k in 1..=32u32 {
            link.observe(t0, t0 + Duration::from_micros(20) * k, 4000);
        }
        assert_eq!(link.cost_model(), prior);
    }

    #[test]
    fn the_stats_say_what_was_measured_and_what_the_plan_did() {
        let prior = CostModel::default();
        let t0 = Instant::now();
        let mut link = LinkEstimator::new(prior);
        for k in 1..=4u32 {
            link.observe(t0, t0 + Duration::from_millis(1) * k, 1000);
        }
        let before = link.stats();
        assert_eq!((before.answers, before.measured_per_fetch), (4, None));
        assert_eq!(before.dear_answers, 0);
        // Not measured yet, but the first answer, to an idle broker, took
        // 1 ms: the plan shares 0.85 ms among the fetches in flight.
        let first = CostModel {
            round_trip: Duration::from_micros(850),
            ..prior
        };
        assert_eq!(link.cost_model(), first);
        assert_eq!(before.widest_merge_gap_bytes, first.merge_gap_bytes());
        // 1 ms a fetch, pipeline full: dear once 8 were sent while the
        // broker was busy (the 9th answer on), and priced so.
        for k in 5..=32u32 {
            link.observe(t0, t0 + Duration::from_millis(1) * k, 1000);
        }
        let dear = link.stats();
        let measured = dear.measured_per_fetch.expect("measured").as_secs_f64();
        assert!((measured - 1e-3).abs() < 1e-5, "{dear:?}");
        assert_eq!(dear.dear_answers, 32 - 8, "{dear:?}");
        assert_eq!(
            dear.widest_merge_gap_bytes,
            link.cost_model().merge_gap_bytes()
        );
        assert!(dear.widest_merge_gap_bytes > 1_000_000, "{dear:?}");
        // Then 20 µs a fetch, a window's worth, the first to an idle
        // broker: cheap now, on a loopback link, and the prior's price is
        // back, but the stats keep what the replay went through.
        let t1 = t0 + Duration::from_millis(40);
        for k in 1..=64u32 {
            link.observe(t1, t1 + Duration::from_micros(20) * k, 1000);
        }
        let after = link.stats();
        let latest = after.measured_per_fetch.expect("measured");
        assert!(latest < Duration::from_micros(150), "{after:?}");
        assert_eq!(link.cost_model(), prior);
        assert_eq!(after.dearest_per_fetch, dear.dearest_per_fetch);
        assert!(after.dear_answers >= dear.dear_answers, "{after:?}");
        assert_eq!(after.widest_merge_gap_bytes, dear.widest_merge_gap_bytes);
        assert_eq!(after.answers, 32 + 64);
    }

    #[test]
    fn fetches_sharing_a_request_share_its_cost() {
        // Requests carrying four partitions' fetches, each request served
        // in 400 µs, pipeline full: a fetch costs 100 µs. Counted as one
        // fetch a request (as before the share), the same requests made a
        // recovery of four partitions over a 1 ms link price every fetch
        // at a whole request, and read through gaps four times as wide.
        let prior = CostModel::default();
        let t0 = Instant::now();
        let mut shared = LinkEstimator::new(prior);
        for k in 1..=32u32 {
            shared.observe_request(t0, t0 + Duration::from_micros(400) * k, 16_000, 4);
        }
        assert!(shared.learned());
        let model = shared.cost_model();
        assert_eq!(model.in_flight, 1, "{model:?}");
        assert!(
            (model.round_trip.as_secs_f64() - 1e-4).abs() < 1e-5,
            "{model:?}"
        );
        // One fetch a request: each costs the whole 400 µs.
        let mut alone = LinkEstimator::new(prior);
        for k in 1..=32u32 {
            alone.observe_request(t0, t0 + Duration::from_micros(400) * k, 16_000, 1);
        }
        let model = alone.cost_model();
        assert_eq!(model.in_flight, 1, "{model:?}");
        assert!(
            (model.round_trip.as_secs_f64() - 4e-4).abs() < 2e-5,
            "{model:?}"
        );
    }

    #[test]
    fn a_prior_set_to_a_slow_round_trip_does_not_hide_a_broker_serving_one_fetch_at_a_time() {
        // A prior of 3 ms a round trip, shared among 64 fetches in flight
        // (as `walfetch calibrate` sets one for a remote link): a broker
        // that then takes 2 ms for each fetch, pipeline full, is dear.
        let prior = CostModel {
            round_trip: Duration::from_millis(3),
            in_flight: 64,
            ..CostModel::default()
        };
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        for k in 1..=32u32 {
            link.observe(t0, t0 + Duration::from_millis(2) * k, 4000);
        }
        let model = link.cost_model();
        assert_eq!(model.in_flight, 1, "{model:?}");
        assert!(
            (model.round_trip.as_secs_f64() - 2e-3).abs() < 1e-5,
            "{model:?}"
        );
    }

    #[test]
    fn the_clients_own_work_on_an_answer_is_not_the_brokers() {
        // The broker serves each fetch in 10 µs, all sent at once; the
        // client spends 2 ms decoding each answer, and finds the next one
        // waiting when it is done. Without `processed`, every fetch would
        // seem to cost 2 ms.
        let prior = CostModel::default();
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        let mut now = t0 + Duration::from_micros(10);
        for _ in 0..32 {
            link.observe(t0, now, 4000);
            now += Duration::from_millis(2);
            link.processed(now);
            now += Duration::from_micros(10);
        }
        assert_eq!(link.cost_model(), prior, "cheap: the prior stays");
    }

    /// Regression: a replay's first fetches go out to an idle broker, and
    /// each waits a whole round trip, dear on a cold start (0.4–2 ms on loopback in the restart bench). With only
    /// a few answered, they made a broker that serves a pipelined fetch in
    /// 20 µs look dear now and then, and the whole recovery read through
    /// gaps (1.14x the union floor instead of 1.02x).
    #[test]
    fn fetches_sent_to_an_idle_broker_do_not_make_a_pipelined_one_look_dear() {
        let prior = CostModel::default();
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        let mut now = t0;
        // Five fetches one after another, 2 ms each from their send.
        for _ in 0..5 {
            link.observe(now, now + Duration::from_millis(2), 4000);
            now += Duration::from_millis(2);
        }
        assert!(!link.learned(), "too few to tell");
        // Then batches of 8 sent at once, answered 20 µs apart: the
        // broker is cheap, and never looks dear meanwhile.
        for round in 0..2 {
            let sent = now;
            for k in 1..=8u32 {
                link.observe(sent, sent + Duration::from_micros(20) * k, 4000);
                assert_eq!(link.cost_model(), prior, "round {round}, answer {k}");
            }
            now = sent + Duration::from_millis(1);
        }
        assert!(link.learned());
    }

    /// A replay's first burst, at the learning limit, sent together, is
    /// enough to learn from: its first answer found the broker idle, the
    /// others did not. A burst of 8 would not be.
    #[test]
    fn one_burst_at_the_learning_limit_teaches_the_link() {
        let mut link = LinkEstimator::new(CostModel::default());
        let sent = Instant::now();
        let fetch = Duration::from_millis(3);
        for k in 1..=LEARNING_IN_FLIGHT as u32 {
            assert!(!link.learned(), "learned before answer {k}");
            link.observe(sent, sent + fetch * k, 1000);
        }
        assert!(link.learned());
        let per_fetch = link.cost_model().round_trip.as_secs_f64();
        assert!((per_fetch - 3e-3).abs() < 1e-4, "{per_fetch}");
    }

    #[test]
    fn the_first_answer_shows_the_links_round_trip_before_the_fit_has_enough() {
        // The replay's first answer, from an idle broker: 5 ms, a remote
        // link. The fit needs more answers; the round trip, less
        // the loopback one the prior stands for, is the link's at once.
        let prior = CostModel {
            in_flight: 64,
            ..CostModel::default()
        };
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        link.observe(t0, t0 + Duration::from_millis(5), 100);
        assert!(!link.learned());
        assert_eq!(link.samples(), 1);
        let model = link.cost_model();
        assert_eq!(model.round_trip, Duration::from_micros(4850), "{model:?}");
        assert_eq!(model.in_flight, 64, "{model:?}");
        assert!(model.merge_gap_bytes() > 30 * prior.merge_gap_bytes());
        // A loopback first answer keeps the prior.
        let mut near = LinkEstimator::new(prior);
        near.observe(t0, t0 + Duration::from_micros(250), 100);
        assert_eq!(near.cost_model(), prior);
    }

    /// Regression: a broker that answers two fetches at a time, 2 ms a
    /// pair (as Tansu 0.6 answered a restart's fetches), costs 1 ms a
    /// fetch. Half of its service times are near zero, and their median
    /// fell on the cheap side of the bound in some replays: the plan then
    /// sent single-batch fetches that the broker served at 1 ms each (a
    /// four-partition restart on Tansu: 90 fetches and 222 ms instead of
    /// 32 and about 160 ms).
    #[test]
    fn a_broker_answering_in_pairs_costs_its_mean_not_its_median() {
        let mut link = LinkEstimator::new(CostModel::default());
        let t0 = Instant::now();
        let sent = t0;
        for pair in 1..=8u32 {
            let at = sent + Duration::from_millis(2) * pair;
            link.observe(sent, at, 1000);
            link.observe(sent, at + Duration::from_micros(30), 1000);
        }
        let model = link.cost_model();
        assert_eq!(model.in_flight, 1, "dear: {model:?}");
        let per_fetch = model.round_trip.as_secs_f64();
        // The dearest eighth dropped, a little under 1 ms.
        assert!((0.8e-3..1.1e-3).contains(&per_fetch), "{per_fetch}");
    }

    /// A cheap broker stays cheap when a few of its answers are held up
    /// by something else: the dearest eighth do not count.
    #[test]
    fn a_few_held_up_answers_do_not_make_a_cheap_broker_dear() {
        let prior = CostModel::default();
        let mut link = LinkEstimator::new(prior);
        let t0 = Instant::now();
        let mut at = t0;
        for k in 0..32u32 {
            // 20 µs a fetch, pipeline full; every sixteenth held up 5 ms.
            at += if k % 16 == 7 {
                Duration::from_millis(5)
            } else {
                Duration::from_micros(20)
            };
            link.observe(t0, at, 4000);
        }
        assert!(link.learned());
        assert_eq!(link.cost_model(), prior);
    }
}
