use super::*;

fn drive(s: &mut Session, slots: usize, mut run: impl FnMut(usize) -> Verdict) {
    while let Action::Run(ix) = s.next(slots) {
        assert!(!ix.is_empty() && ix.len() <= slots);
        for i in ix {
            let v = run(i);
            s.record(i, v);
        }
    }
}

fn adaptive(c: f64) -> Policy {
    Policy::Confidence {
        confidence: c,
        max_runs: None,
    }
}

#[test]
fn deterministic_fault_is_found_with_confidence() {
    let mut s = Session::new((0..65).collect(), EndpointCheck::First, adaptive(0.95));
    drive(
        &mut s,
        1,
        |i| if i >= 40 { Verdict::New } else { Verdict::Old },
    );
    let end = s.conclusion().unwrap();
    assert_eq!(end.conclusion, Conclusion::Found { index: 40 }, "{end:?}");
    assert!(end.confidence.unwrap() >= 0.95);
}

#[test]
fn plain_bisect_states_its_low_confidence() {
    let mut s = Session::new((0..65).collect(), EndpointCheck::First, Policy::Repeat(1));
    drive(
        &mut s,
        1,
        |i| if i >= 40 { Verdict::New } else { Verdict::Old },
    );
    let end = s.conclusion().unwrap();
    assert_eq!(end.culprit(), Some(40));
    // One pass at the parent cannot make a possibly-rare fault unlikely.
    assert!(end.confidence.unwrap() < 0.95);
}

#[test]
fn budget_exhaustion_is_inconclusive_with_candidates() {
    let mut s = Session::new(
        (0..200).collect(),
        EndpointCheck::First,
        Policy::Confidence {
            confidence: 0.95,
            max_runs: Some(6),
        },
    );
    drive(&mut s, 1, |i| {
        if i >= 120 {
            Verdict::New
        } else {
            Verdict::Old
        }
    });
    assert_eq!(s.runs(), 6);
    let end = s.conclusion().unwrap();
    let Conclusion::Ambiguous {
        indices: candidates,
    } = &end.conclusion
    else {
        panic!("{end:?}")
    };
    assert!(end.inconclusive, "{end:?}");
    assert!(candidates.contains(&120), "{candidates:?}");
    assert!(end.confidence.unwrap() >= 0.95);
    assert!(candidates.len() > 1);
}

#[test]
fn a_failure_at_the_reinforced_parent_moves_the_answer() {
    // Candidate 30 fails only on its 4th run: the search first settles on 31 and then must
    // discover 30 while reinforcing.
    let mut runs30 = 0;
    let mut s = Session::new((0..64).collect(), EndpointCheck::First, adaptive(0.9));
    drive(&mut s, 1, |i| match i {
        30 => {
            runs30 += 1;
            if runs30 >= 4 {
                Verdict::New
            } else {
                Verdict::Old
            }
        }
        i if i > 30 => Verdict::New,
        _ => Verdict::Old,
    });
    assert!(matches!(
        s.conclusion(),
        Some(e) if e.culprit() == Some(30)
    ));
}

#[test]
fn replayed_evidence_is_not_run_again() {
    let oracle = |i: usize| if i >= 10 { Verdict::New } else { Verdict::Old };
    let mut first = Session::new((0..32).collect(), EndpointCheck::First, adaptive(0.95));
    let mut journal = Vec::new();
    drive(&mut first, 2, |i| {
        journal.push(i);
        oracle(i)
    });
    let mut second = Session::new((0..32).collect(), EndpointCheck::First, adaptive(0.95));
    for &i in &journal {
        second.record(i, oracle(i));
    }
    let mut fresh = 0;
    drive(&mut second, 2, |i| {
        fresh += 1;
        oracle(i)
    });
    assert_eq!(fresh, 0);
    assert_eq!(first.conclusion(), second.conclusion());
}

/// A seeded flaky oracle: candidates from `culprit` on fail with probability `p`.
fn flaky(culprit: usize, p: f64, seed: u64) -> impl FnMut(usize) -> Verdict {
    let mut state = seed;
    move |i| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (state >> 11) as f64 / (1u64 << 53) as f64;
        if i >= culprit && u < p {
            Verdict::New
        } else {
            Verdict::Old
        }
    }
}

#[test]
fn resuming_wave_by_wave_replays_the_same_decisions() {
    // The driver replays a stored journal wave by wave: each wave the Session asks for is
    // answered from the store. The waves asked must be the first run's, in order.
    let keys: Vec<u64> = (0..300).collect();
    let mut first = Session::new(keys.clone(), EndpointCheck::First, adaptive(0.95));
    let mut oracle = flaky(170, 0.4, 5);
    let mut waves = Vec::new();
    while let Action::Run(ix) = first.next(3) {
        let got: Vec<Verdict> = ix.iter().map(|&i| oracle(i)).collect();
        for (&i, &v) in ix.iter().zip(&got) {
            first.record(i, v);
        }
        waves.push((ix, got));
    }
    let mut second = Session::new(keys, EndpointCheck::First, adaptive(0.95));
    for (ix, got) in &waves {
        assert_eq!(second.next(3), Action::Run(ix.clone()));
        for (&i, &v) in ix.iter().zip(got) {
            second.record(i, v);
        }
    }
    assert_eq!(second.next(3), Action::Finished);
    assert_eq!(first.conclusion(), second.conclusion());
    assert!(matches!(
        first.conclusion(),
        Some(e) if e.culprit() == Some(170)
    ));
}

#[test]
fn a_reliable_fault_costs_a_few_runs_more_than_git_bisect() {
    // p = 1 with the rate unknown: ceil(log2 N) + 2 endpoint runs is what git bisect
    // spends; the Session must also make the passes believable, which costs some more.
    for culprit in [1, 17, 300, 512, 998, 999] {
        let mut s = Session::new((0..1000).collect(), EndpointCheck::First, adaptive(0.95));
        drive(&mut s, 1, |i| {
            if i >= culprit {
                Verdict::New
            } else {
                Verdict::Old
            }
        });
        assert!(
            s.conclusion().and_then(|e| e.culprit()) == Some(culprit),
            "{:?}",
            s.conclusion()
        );
        assert!(s.runs() <= 30, "culprit {culprit}: {} runs", s.runs());
    }
}

#[test]
fn a_skipped_parent_leaves_an_ambiguous_answer() {
    let mut s = Session::new((0..40).collect(), EndpointCheck::First, adaptive(0.9));
    drive(&mut s, 1, |i| match i {
        20 => Verdict::Skip,
        i if i >= 21 => Verdict::New,
        _ => Verdict::Old,
    });
    let end = s.conclusion().unwrap();
    assert_eq!(
        end.conclusion,
        Conclusion::Ambiguous {
            indices: vec![20, 21]
        }
    );
    assert!(!end.inconclusive);
    assert!(end.confidence.unwrap() >= 0.9);
    // Skipped candidates are not run again.
    assert_eq!(s.evidence()[20].runs(), 1);
}

#[test]
fn endpoints_that_lie_are_reported() {
    let mut s = Session::new((0..50).collect(), EndpointCheck::First, adaptive(0.95));
    drive(&mut s, 2, |_| Verdict::New);
    assert_eq!(
        s.conclusion().map(|e| &e.conclusion),
        Some(&Conclusion::BadEndpoint {
            which: Endpoint::Good,
            got: Verdict::New
        })
    );
    let mut s = Session::new((0..50).collect(), EndpointCheck::First, adaptive(0.95));
    drive(&mut s, 1, |_| Verdict::Old);
    assert_eq!(
        s.conclusion().map(|e| &e.conclusion),
        Some(&Conclusion::BadEndpoint {
            which: Endpoint::Bad,
            got: Verdict::Old
        })
    );
    // Only the bad endpoint ran: it is checked first.
    assert_eq!(s.evidence()[49].runs() as u64, s.runs());
}

#[test]
fn a_rare_fault_is_found_near_the_information_limit() {
    // p = 0.2 over 256 candidates: log2(256) / C(0.2) = 8 / 0.117 = 68 runs at best.
    let mut total = 0;
    for seed in 0..10 {
        let mut s = Session::new((0..256).collect(), EndpointCheck::First, adaptive(0.95));
        drive(&mut s, 1, flaky(100 + seed as usize, 0.2, seed));
        total += s.runs();
    }
    assert!(total / 10 < 2 * 68 + 20, "{} runs per answer", total / 10);
}

#[test]
fn spare_slots_repeat_pending_candidates() {
    let mut s = Session::new((0..1000).collect(), EndpointCheck::Lazy, adaptive(0.95));
    let Action::Run(ix) = s.next(4) else { panic!() };
    assert_eq!(ix.len(), 4);
    let Action::Run(ix) =
        Session::new((0..1000).collect(), EndpointCheck::Lazy, Policy::Repeat(1)).next(4)
    else {
        panic!()
    };
    let mut d = ix.clone();
    d.dedup();
    assert_eq!(d.len(), 4, "plain bisect never repeats: {ix:?}");
}

#[test]
fn a_reliable_fault_is_confirmed_at_the_answer_as_well_as_at_its_parent() {
    // p = 1: every run at and after the answer fails, so only more runs tell the rate is
    // high; failures at the answer and passes at its parent both raise the cautious mass,
    // and the Session mixes them instead of running the parent alone (it ran 8 times).
    let culprit = 300;
    let mut s = Session::new((0..1000).collect(), EndpointCheck::First, adaptive(0.95));
    let mut journal = Vec::new();
    drive(&mut s, 1, |i| {
        journal.push(i);
        if i >= culprit {
            Verdict::New
        } else {
            Verdict::Old
        }
    });
    assert_eq!(s.conclusion().and_then(|e| e.culprit()), Some(culprit));
    let at = |x: usize| journal.iter().filter(|&&i| i == x).count();
    assert!(at(culprit) >= 2, "{journal:?}");
    assert!(at(culprit - 1) < 8, "{journal:?}");
}

#[test]
fn once_a_run_at_the_answer_passed_the_planner_alone_decides() {
    // Bad endpoint 15 and candidate 8 failed, 7 passed eight times: the answer 8 holds most
    // of the posterior and nothing at or after it has passed, so a run at 8 is weighed
    // against the planner's pick; after a pass at 8 the fault is known to be flaky and the
    // run at the answer is no longer considered.
    let mut s = Session::new((0..16).collect(), EndpointCheck::First, adaptive(0.95));
    for (i, v) in [(15, Verdict::New), (0, Verdict::Old), (8, Verdict::New)] {
        s.record(i, v);
    }
    for _ in 0..8 {
        s.record(7, Verdict::Old);
    }
    let weigh = |s: &Session| {
        let unt = vec![false; 16];
        let b = belief(s.evidence(), Beta::UNIFORM).unwrap();
        let stop = stop_masses(s.evidence(), &unt, Beta::UNIFORM).unwrap();
        assert_eq!(stop.block, vec![8]);
        assert!(stop.mass >= 0.5 && stop.least < 0.95, "{stop:?}");
        (
            expected_stop_evidence(s.evidence(), &b, 8, &unt, Beta::UNIFORM),
            expected_stop_evidence(s.evidence(), &b, 7, &unt, Beta::UNIFORM),
            s.answer_run(&b, 7, &stop, &unt),
        )
    };
    // Eight passes at the parent against two failures at and after the answer: another
    // failure at 8 is expected to do more for the cautious mass than a ninth pass at 7.
    let (at_answer, at_parent, chosen) = weigh(&s);
    assert!(at_answer > at_parent, "{at_answer} {at_parent}");
    assert_eq!(chosen, Some(8));
    s.record(8, Verdict::Old);
    s.record(7, Verdict::Old);
    assert_eq!(weigh(&s).2, None);
}
