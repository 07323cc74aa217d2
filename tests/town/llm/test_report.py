"""The answer report: by the model or by the fallback, by task and reason, and the 5% warning."""

from __future__ import annotations

from datetime import date

from town.llm.report import WARN_AFTER, AnswerReport
from town.llm.tasks import TASKS

DAY = date(2026, 2, 13)
WORDS = {task.name: task.in_words for task in TASKS}  # each task's own words, as the chain says


def report_of(model: int, fallbacks: dict[str, int], task: str = "react") -> AnswerReport:
    report = AnswerReport(today=lambda: DAY)
    for _ in range(model):
        report.answered(task, None, WORDS[task])
    for reason, n in fallbacks.items():
        for _ in range(n):
            report.answered(task, reason, WORDS[task])
    return report


def test_figures_by_task_and_reason() -> None:
    report = report_of(18, {"timeout": 1, "HTTP 500": 1})
    report.answered("utter", None, WORDS["utter"])
    assert report.as_json() == {
        "fallback_share": round(2 / 21, 4),
        "cached_prompt_share": None,  # no server said what its cache held
        "fallbacks_by_task": {"react": {"HTTP 500": 1, "timeout": 1}},
        "answers_by_task": {
            "react": {"model": 18, "fallback": 2},
            "utter": {"model": 1, "fallback": 0},
        },
        "tasks_in_words": {"react": "reactions", "utter": "small talk"},
    }
    assert report.lines() == [
        "react: 18 by the model, 2 by the fallback (timeout 1, HTTP 500 1)",
        "utter: 1 by the model, 0 by the fallback",
    ]


def test_a_warning_only_above_five_percent_of_the_day() -> None:
    assert report_of(95, {"budget": 5}).warning() is None
    warning = report_of(94, {"budget": 6}).warning()
    assert warning is not None and "6%" in warning
    assert report_of(0, {}).warning() is None and report_of(0, {}).share() == 0.0


def test_another_day_counts_apart() -> None:
    report = report_of(1, {"timeout": 3})
    assert report.share(date(2026, 2, 14)) == 0.0 and report.share(DAY) == 0.75


def test_status_lines_say_the_answers_by_who_made_them() -> None:
    report = report_of(3, {"timeout": 1})
    assert report.status_lines() == [
        "LLM answers today: 3 by the model, 1 by the offline fallback (25.0%)",
        "  fallback reactions (react): timeout 1",
        "warning: 25% of today's LLM answers came from the offline fallback (over 5%); "
        "see the reasons by task",
    ]
    assert report_of(0, {}).status_lines() == []


def test_the_log_warns_once_a_day_after_enough_answers() -> None:
    report = report_of(WARN_AFTER - 2, {"HTTP 500": 1})
    assert report.warn_once() is None  # too few answers yet to judge the day
    report.answered("react", "HTTP 500", WORDS["react"])
    assert report.warn_once() is not None
    report.answered("react", "HTTP 500", WORDS["react"])
    assert report.warn_once() is None


def test_the_share_of_prompt_tokens_the_server_s_cache_held() -> None:
    report = report_of(3, {"timeout": 1})
    report.prompted(1000, 0)
    assert report.cached_share() is None and report.as_json()["cached_prompt_share"] is None
    report.prompted(3000, 2000)
    assert report.as_json()["cached_prompt_share"] == 0.5
    assert "LLM prompt tokens held by the server's cache today: 50%" in report.status_lines()


def test_the_pace_a_server_keeps_said_in_a_member_s_words() -> None:
    from town.llm.chain import Handles
    from town.llm.pacing import Pacer

    report = AnswerReport(today=lambda: DAY)
    pacer = Pacer(1, 30.0)
    for _ in range(3):
        pacer.answered(4.0)  # a call of 4 s: 15 a minute on one slot
    handles = Handles(report=report, pacer=pacer)
    assert handles.pace_line() == ""  # nothing asked of it yet
    handles.keep_pace(4.0)
    for _ in range(3):  # three ticks, each wanting ten calls, of which one made by the model
        report.ticked()
        report.answered("plan_day", None, WORDS["plan_day"])
        for task in ["utter"] * 5 + ["rate_importance"] * 4:
            report.answered(task, "pace", WORDS[task])
    assert handles.pace_line() == (
        "this server thinks about 15 things a minute; at a tick every 4 s the residents' "
        "small talk and ratings are made offline; a tick every 40 s would let the model do all "
        "of it"
    )
