"""The speaking tasks, asked for as plain text (:mod:`town.llm.speech`): a line of a talk or of a
visitor's chat, and an interview's answer."""

from __future__ import annotations

from town.llm import schemas as s
from town.llm import speech
from town.llm.offline import talk, visit
from town.llm.speech import speech_task
from town.llm.urgency import PERSON

UTTER = speech_task(
    "utter",
    s.UtterInput,
    s.UtterResult,
    lambda inputs, said: s.UtterResult(text=said, end=speech.ends_talk(said)),
    speaker_field="speaker",
    max_tokens=64,
    offline=visit.say,
    words="small talk",
)
INTERVIEW = speech_task(
    "interview",
    s.InterviewInput,
    s.InterviewResult,
    lambda inputs, said: s.InterviewResult(answer=said),
    speaker_field="resident",
    max_tokens=160,
    limit=s.PASSAGE_CAP,
    offline=talk.interview,
    urgency=PERSON,
    words="interview answers",
)
