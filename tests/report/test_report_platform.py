"""The platform's stalls in words and pictures: a trial's clause (console line, trial table), a run's
sentence, and the report's platform section with the latency timeline of the trials that matter."""
from __future__ import annotations

from report_golden import ROUTER

from netrig.measure.platform import StallEpisode, StallSide, TrialStalls
from netrig.measure.seam import TrialCounts
from netrig.view.stalls import StallStory, stall_note

HOST = StallEpisode(0.5, 6.0, 1, False)
GUEST = StallEpisode(0.7, 2.5, 1, True, "kworker/1:2")


def counts(lost: int, in_stalls: int | None, dut: tuple[StallEpisode, ...] = (HOST, GUEST)) -> TrialCounts:
    return TrialCounts(achieved_pps=1e5, frames_sent=100_000, frames_received=100_000 - lost,
                       stalls=TrialStalls(StallSide(), StallSide(dut)), loss_in_stalls=in_stalls)


def test_a_trial_clause_names_the_stalls_and_the_loss_in_them():
    assert stall_note(counts(569, 569)) == "DUT 2 stalls (max 6.0 ms, 1 by other tasks); all 569 lost frames in DUT stalls"
    assert stall_note(counts(2484, 120, (HOST,))) == "DUT 1 stall (max 6.0 ms); 120 of 2,484 lost frames in DUT stalls"
    assert stall_note(counts(0, 0, ())) == "", "nothing to say: no stall, no loss"
    unmeasured = TrialCounts(achieved_pps=1e5, frames_sent=10, frames_received=5)
    assert stall_note(unmeasured) == ""


def test_a_watch_that_missed_kernel_events_says_so_and_the_record_keeps_it():
    c = TrialCounts(achieved_pps=1e5, frames_sent=100_000, frames_received=100_000,
                    stalls=TrialStalls(StallSide(), StallSide(), missed_events=3))
    assert stall_note(c) == "the stall watch missed 3 kernel events"
    assert TrialStalls.from_dict(c.stalls.to_dict()).missed_events == 3
    assert TrialStalls.from_dict({"tester": {}, "dut": None}).missed_events == 0, "a record older than the field"


def test_a_runs_sentence_counts_the_trials_that_lost_only_in_stalls():
    story = StallStory.of([counts(569, 569), counts(2484, 120, (HOST,)), counts(0, 0)])
    assert (story.lossy, story.lossy_all_in_stalls, story.lost, story.lost_in_stalls) == (2, 1, 3053, 689)
    assert story.dut_stalls == 5 and story.dut_max_ms == 6.0
    assert story.sentence().startswith("2 of 3 trials lost frames; 1 of them only while the DUT was stalled")
    assert "not measured" in StallStory.of([TrialCounts(achieved_pps=1.0, frames_sent=1, frames_received=1)]).sentence()


def test_the_platform_section_draws_the_lossiest_trials_and_the_periodic_one(rendered):
    page = rendered(ROUTER).read_text()  # the golden router report, drawn once for the run
    section = page[page.index('<section id="platform">'):]
    section = section[:section.index("</section>")]
    assert "trials lost frames" in section and "DUT stalls" in section
    assert section.count('data-plot="latency_timeline"') == 1, "the one trial with a timeline"
    assert "spikes every 100.0 ms" in section
