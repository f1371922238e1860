//! Work on several threads, results consumed in order.
//!
//! Seeds, sweep cells and soak runs are independent, so they can run on every core; what they
//! produce must not depend on how many threads ran them or which finished first. [`map_ordered`]
//! hands each result to one consumer in index order, so a report built from them is the same
//! for any job count, and the consumer can fold results as they come (a merged histogram)
//! instead of keeping them all.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// Runs `work(i)` for every `i` in `0..count` on `jobs` threads (at least one) and calls
/// `consume(i, result)` on the calling thread for `i = 0, 1, 2, …` in that order, as soon as
/// every earlier result has been consumed.
///
/// Results that finish ahead of an unfinished earlier one wait in a buffer; with work of
/// similar cost that buffer stays near `jobs` entries.
pub fn map_ordered<T: Send>(
    count: usize,
    jobs: usize,
    work: impl Fn(usize) -> T + Sync,
    mut consume: impl FnMut(usize, T),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, T)>();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, count.max(1)) {
            let tx = tx.clone();
            let (next, work) = (&next, &work);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                // The receiver lives until every worker is done, so this cannot fail.
                let _ = tx.send((i, work(i)));
            });
        }
        drop(tx);
        let mut waiting = BTreeMap::new();
        let mut expected = 0;
        for (i, result) in rx {
            waiting.insert(i, result);
            while let Some(result) = waiting.remove(&expected) {
                consume(expected, result);
                expected += 1;
            }
        }
    });
}

/// The default job count: every core the process may use.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_arrive_in_index_order_for_any_job_count() {
        for jobs in [1, 2, 3, 8] {
            let mut seen = Vec::new();
            // Later indices finish first: the consumer must still see them in order.
            map_ordered(
                20,
                jobs,
                |i| {
                    std::thread::sleep(std::time::Duration::from_micros((20 - i as u64) * 50));
                    i * i
                },
                |i, v| seen.push((i, v)),
            );
            let expected: Vec<_> = (0..20).map(|i| (i, i * i)).collect();
            assert_eq!(seen, expected, "jobs = {jobs}");
        }
    }

    #[test]
    fn zero_items_and_zero_jobs_do_nothing_and_still_work() {
        let mut n = 0;
        map_ordered(0, 4, |i| i, |_, _| n += 1);
        assert_eq!(n, 0);
        map_ordered(3, 0, |i| i, |_, _| n += 1);
        assert_eq!(n, 3);
    }
}
