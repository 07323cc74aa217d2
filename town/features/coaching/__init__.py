"""Mock interviews: an interviewer resident rehearses a job interview with a visitor.

Who interviews, in which room, for which company and role, with which bank of questions, is
persona data (``interviews.toml``, read by ``interviews.py``). ``room.plug_in`` gives each
interview room of a town a place handler (``town.inputs.handlers``): when a visitor speaks there
while its interviewer is there and awake, the interviewer takes a turn (``session.turn``),
instead of small talk:

1. The first words open a session (``Candidate.session``): a greeting and the first question.
   A later session starts from the plan made after the last one: its focus topics come first in
   the bank handed to the model, and the earlier answer it builds on is given too.
2. Each message after that is judged by one ``coach_turn`` call: an answer (stored as a memory
   of the interviewer, tied to the visitor's key ``platform:user id``), or a question to the
   interviewer (answered, and the question asked again). A thin answer gets one follow-up;
   otherwise the next question. One question at a time (the task's check enforces it).
3. After ``questions_per_session`` main questions, or once ``session_minutes`` of game time have
   passed, the session closes: a ``coach_review`` call names strengths and weak spots citing the
   answers' memory ids (stored as reflection memories) and plans the next session's focus
   (a plan memory, and ``Candidate.focus`` / ``start_from`` for the next opening); the
   interviewer says a closing summary and what comes next.

``feedback.py`` gives the candidate concrete points (``coach_feedback``), each quoting one of
their answers. The tasks (``tasks.py``, prompts in ``prompts/``), their models (``schemas.py``)
and their offline answers (``offline.py``) live here too, not in ``town.llm``.

Everything a session needs is in the interviewer's ``ResidentState.coaching`` (JSON on its row)
and its memories, so a restarted town resumes a session where it stopped.
"""
