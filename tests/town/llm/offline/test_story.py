"""The offline brain's story over a two-day Smallville run (issue 31, item 5): one shared run,
read as a newcomer reads the demo, and checked line by line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC
from typing import Any

from town.experiments.society.attendance import present_at, whereabouts
from town.world.persona import TownSpec
from town.world.places import World

HOME_ONLY = ("brushing teeth", "taking a shower", "getting into bed", "making the bed", "sleeping")
DANGLING = frozenset(
    "a an the and or but of in at on to for from with by his her their my your our its".split()  # noqa: SIM905
)
VOCATIVE_I = re.compile(r"\b(?:hi|hey|hello|bye|thanks|talking|see you)\s*,?\s+I\b(?!')|, I[!.?]")


def said(run: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (e for e in run if e["kind"] == "said")


def test_no_line_quotes_a_quote(run: list[dict[str, Any]]) -> None:
    quoting = [e["text"] for e in said(run) if re.search('["“”]', e["text"])]
    assert quoting == []


def test_no_one_is_called_i(run: list[dict[str, Any]]) -> None:
    assert [e["text"] for e in said(run) if VOCATIVE_I.search(e["text"])] == []


def test_no_line_ends_on_a_dangling_word_or_is_empty(run: list[dict[str, Any]]) -> None:
    spoken = [e for e in run if e["kind"] in ("said", "action", "reacted")]
    assert spoken
    bad = []
    for event in spoken:
        found = re.findall(r"[\w']+", event["text"].lower())
        if not found or found[-1] in DANGLING:
            bad.append(event["text"])
    assert bad == []


def test_no_line_is_said_twice_in_one_conversation(run: list[dict[str, Any]]) -> None:
    talks: dict[frozenset[str], list[str]] = {}
    repeats = []
    for event in run:
        if event["kind"] == "conversation":
            talks.pop(frozenset(event["participants"]), None)
        elif event["kind"] == "said":
            heard = talks.setdefault(frozenset((event["resident"], event.get("to") or "")), [])
            if event["text"] in heard:
                repeats.append(event["text"])
            heard.append(event["text"])
    assert repeats == []


def test_private_phrases_are_told_only_to_their_subject_or_a_close_friend(
    run: list[dict[str, Any]], town: TownSpec
) -> None:
    told = []
    secrets = [(r, p) for r in town.residents for p in r.private_phrases()]
    assert secrets, "the persona files mark some phrases private"
    for resident, phrase in secrets:
        named = {w.lower() for p in town.residents for w in p.name.split()}
        kept = [w for w in re.findall(r"[\w']+", phrase.lower()) if w not in named]
        grams = {" ".join(kept[i : i + 3]) for i in range(len(kept) - 2)}
        for event in said(run):
            listener = event.get("to") or ""
            if resident.may_confide(phrase, listener):
                continue
            text = " ".join(re.findall(r"[\w']+", event["text"].lower()))
            if any(g in text for g in grams):
                told.append((event["resident"], listener, event["text"]))
    assert told == []


def test_home_routines_happen_at_home(run: list[dict[str, Any]], town: TownSpec) -> None:
    homes = {r.name: World.area_of(r.home) for r in town.residents}
    away = [
        (e["resident"], e["text"], e["location"])
        for e in run
        if e["kind"] == "action"
        and any(h in e["text"] for h in HOME_ONLY)
        and World.area_of(e["location"]) != homes[e["resident"]]
    ]
    assert away == []


def test_no_action_is_repeated_more_than_twice_in_a_row(run: list[dict[str, Any]]) -> None:
    """(Going back to what one was doing after a reaction or a talk is no repeat.)"""
    last: dict[str, tuple[str, int]] = {}
    loops = []
    for event in run:
        if event["kind"] in ("reacted", "conversation"):
            for who in event.get("participants") or [event["resident"]]:
                last.pop(who, None)
        if event["kind"] != "action":
            continue
        text, count = last.get(event["resident"], ("", 0))
        count = count + 1 if event["text"] == text else 1
        last[event["resident"]] = (event["text"], count)
        if count == 3:
            loops.append(event["text"])
    assert loops == []


def test_the_party_gathers_five_guests_at_hobbs_cafe(
    run: list[dict[str, Any]], town: TownSpec
) -> None:
    party = next(e for e in town.scenario.events if e.id == "valentines_party")
    start, end = (t.replace(tzinfo=UTC) for t in (party.starts_at, party.ends_at))
    tracks = whereabouts(run)
    guests = {
        who
        for who, track in tracks.items()
        if who != party.host and present_at(track, party.location, start, end)
    }
    assert len(guests) >= 5, sorted(guests)
    told = [e for e in said(run) if "party" in e["text"].lower()]
    assert told, "the party is news that spreads in conversations"
    assert any(start <= e["at"] < end for e in run if "party" in e["text"].lower())


def test_a_move_is_narrated_once(run: list[dict[str, Any]]) -> None:
    moves = [(e["resident"], e["at"], e.get("direction")) for e in run if e["kind"] == "moved"]
    assert moves and len(moves) == len(set(moves))  # one "left for" and one "arrived" a move
