"""Speech asked for as plain text: the prompt small models can answer, and the cleaning of what
they say (the SmolLM2 replies of issue 38 among the cases)."""

from __future__ import annotations

import pytest

from tests.helpers import sample
from town.llm import schemas as s
from town.llm.speech import clean, ends_talk, third_person
from town.llm.tasks import INTERVIEW, UTTER

ME = "Isabella Rodriguez"


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ("Hi Klaus! The cafe is busy today.", "Hi Klaus! The cafe is busy today."),
        ('  "Hello there, welcome in!"  ', "Hello there, welcome in!"),
        ("Isabella Rodriguez: I'm baking scones.", "I'm baking scones."),
        ("You: Sure, come by at five.", "Sure, come by at five."),
        ("**Isabella**: Lovely to see you.", "Lovely to see you."),
        ('{"text": "I am well, thanks!", "end": false}', "I am well, thanks!"),
        ("<s>Good morning!</s>", "Good morning!"),
        ("Good morning!\nKlaus: and to you", "Good morning!"),
        ("I'm Isabella, I run Hobbs Cafe.", "I'm Isabella, I run Hobbs Cafe."),
    ],
)
def test_what_a_model_says_is_cleaned(reply: str, said: str) -> None:
    assert clean(reply, ME) == said


@pytest.mark.parametrize(
    "reply",
    [
        "This is Mei Lin. Mei Lin is proud of her son...",
        "<whoami_when</whom>",
        "As you can see from the INPUT JSON, Isabella Rodriguez is planning...",
        "Isabella is planning a party at the cafe.",
        "Isabella's cafe is open until eight.",
        '{"unexpected": "not the shape you asked for"}',
        '{"text": "cut sh',
        "",
        "...",
        "Speak as the character, in the first person",
    ],
)
def test_what_is_no_speech_is_refused(reply: str) -> None:
    speaker = "Mei Lin" if "Mei Lin" in reply else ME
    with pytest.raises(ValueError):
        clean(reply, speaker)


def test_an_echo_of_the_prompt_is_refused() -> None:
    memory = "Klaus Mueller is writing a research paper on gentrification"
    with pytest.raises(ValueError, match="echoes"):
        clean(memory, ME, prompt=f"What you remember:\n- {memory}\n")


def test_speaking_of_oneself_by_name_is_third_person() -> None:
    assert third_person("Isabella Rodriguez loves her cafe.", ME)
    assert not third_person("I'm Isabella. Klaus is here too.", ME)


def test_a_goodbye_may_end_the_talk() -> None:
    assert ends_talk("Well, I must go. See you tomorrow!")
    assert not ends_talk("How was your morning?")


def test_the_prompt_speaks_to_the_resident_what_never_changes_first() -> None:
    thread = [
        s.Utterance(speaker="Klaus Mueller", text="Morning,\nIsabella!"),
        s.Utterance(speaker=ME, text="Morning, Klaus."),
        s.Utterance(speaker="Maria Lopez", text="Hi both!"),
        s.Utterance(speaker="Klaus Mueller", text="Coffee, please."),
    ]
    inputs = sample(UTTER).model_copy(update={"history": thread})
    system, *turns = UTTER.render(inputs)
    content = system["content"]
    assert content.startswith(UTTER.system)  # the same for every resident: cached
    persona = f"You are {ME}. About you: {inputs.speaker_summary}"
    assert content.index(persona) < content.index("- Klaus Mueller is writing")  # notes after
    assert "JSON" not in content and "$" not in content and "INPUT" not in content
    assert turns == [  # the thread as the chat's turns, the words to answer last
        {"role": "user", "content": "Morning, Isabella!"},
        {"role": "assistant", "content": "Morning, Klaus."},
        {"role": "user", "content": "Maria Lopez: Hi both! Coffee, please."},
    ]
    opening = UTTER.render(sample(UTTER))[1:]
    assert opening == [
        {"role": "user", "content": "(Klaus Mueller is here with you at Hobbs Cafe.)"}
    ]
    asked = INTERVIEW.render(sample(INTERVIEW))
    assert "You are asked by a news reporter." in asked[0]["content"]
    assert asked[1:] == [{"role": "user", "content": "Who is running for mayor?"}]


def test_words_are_read_into_the_result() -> None:
    result = UTTER.parse(sample(UTTER), "Right, I have to run. Bye!")
    assert result == s.UtterResult(text="Right, I have to run. Bye!", end=True)
    with pytest.raises(ValueError):
        UTTER.parse(sample(UTTER), '{"json": "only"}')


@pytest.mark.parametrize(
    ("reply", "said"),
    [  # SmolLM2-135M's, against the real server
        ("(to Alice) Oh, thank you for that.", "Oh, thank you for that."),
        ("*I'm so excited to have you at Hobbs Cafe!", "I'm so excited to have you at Hobbs Cafe!"),
        ("I love it here (looking around) truly.", "I love it here truly."),
        ("I love being around people. And I'm sure it's a", "I love being around people."),
    ],
)
def test_stage_directions_and_a_cut_sentence_are_dropped(reply: str, said: str) -> None:
    assert clean(reply, ME) == said


@pytest.mark.parametrize(
    "reply",
    [
        "Alison: Hey, Isabella. How's your day going?",  # the visitor's line, not hers
        "Klaus Mueller: I'll be happy to help with that.",
        "What's the plan:",
        "What you want: Alice is your friend and she loves you",
        "(A little embarrassed, I take a sip of my own coffee)",
        "The conversation has come to an end. I am no longer with you.",
    ],
)
def test_lines_spoken_as_another_or_about_the_prompt_are_refused(reply: str) -> None:
    with pytest.raises(ValueError):
        clean(reply, ME)


def test_asked_sincerely_whether_it_is_an_ai_it_must_say_so() -> None:
    asked = sample(UTTER).model_copy(
        update={"history": [s.Utterance(speaker="Klaus Mueller", text="Are you a real person?")]}
    )
    with pytest.raises(ValueError, match="AI"):
        UTTER.parse(asked, "I'm a real person. I just started a new job.")
    said = UTTER.parse(asked, "No, I'm an AI character who runs the cafe here.")
    assert said.text == "No, I'm an AI character who runs the cafe here."
    question = sample(INTERVIEW).model_copy(update={"question": "Are you an AI?"})
    with pytest.raises(ValueError):
        INTERVIEW.parse(question, "Yes, I am John Lin, a human pharmacist.")
