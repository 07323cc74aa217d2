"""The Smallville town as data: what it holds, and how broken town folders are reported."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, time
from importlib import resources
from pathlib import Path

import pytest

from town.world.load import available_towns, load_town
from town.world.persona import PersonaError, TownSpec, split_path


@pytest.fixture(scope="module")
def town() -> TownSpec:
    return load_town("smallville")


# -- What Smallville holds -----------------------------------------------------------------------


def test_smallville_has_25_residents_with_unique_names(town: TownSpec) -> None:
    names = [resident.name for resident in town.residents]
    assert len(names) == 25
    assert len(set(names)) == 25
    assert "smallville" in available_towns()


def test_every_home_workplace_and_known_place_resolves(town: TownSpec) -> None:
    paths = set(town.paths())
    areas = {area.name for area in town.areas}
    for resident in town.residents:
        assert resident.home in paths and len(split_path(resident.home)) == 2, resident.name
        assert resident.workplace == "" or resident.workplace in paths, resident.name
        assert set(resident.known_places) <= areas, resident.name
        for place in filter(None, (resident.home, resident.workplace)):
            assert split_path(place)[0] in resident.known_places, resident.name


def test_the_papers_relations_are_seeded(town: TownSpec) -> None:
    john = town.resident("John Lin")
    assert john.workplace == "Willow Market and Pharmacy: pharmacy counter"
    for relative in ("Mei Lin", "Eddy Lin", "Sam Moore", "Jennifer Moore", "Tom Moreno"):
        assert relative in john.paragraph
    assert "Klaus Mueller" in town.resident("Maria Lopez").paragraph
    assert "gentrification" in town.resident("Klaus Mueller").paragraph
    assert "professor" in town.resident("Mei Lin").occupation
    assert "music theory" in town.resident("Eddy Lin").occupation
    assert town.resident("Isabella Rodriguez").workplace.startswith("Hobbs Cafe")
    assert town.resident("Arthur Burton").workplace.startswith("The Rose and Crown Pub")

    sam_facts = town.scenario.facts_for("Sam Moore")
    assert [fact.id for fact in sam_facts] == ["mayor_election"]
    assert "mayor" in sam_facts[0].phrase
    party = town.scenario.fact("valentines_party")
    assert party.resident == "Isabella Rodriguez"
    assert "Hobbs Cafe" in party.phrase and "February 14" in party.phrase
    assert party.mentioned_in("Yes, Isabella invited me to a party") and not party.mentioned_in(
        "No, I have not heard of one"
    )


def test_seed_phrases_split_the_paragraph_and_add_the_scenario_facts(town: TownSpec) -> None:
    for resident in town.residents:
        phrases = resident.seed_phrases()
        assert 6 <= len(phrases) <= 12, resident.name
        assert all(p == p.strip() and p and ";" not in p and "\n" not in p for p in phrases)
        assert resident.name in phrases[0]
    isabella = town.resident("Isabella Rodriguez")
    with_facts = isabella.seed_phrases(town.scenario)
    assert with_facts[:-1] == isabella.seed_phrases()
    assert "Valentine's Day party" in with_facts[-1]
    john = town.resident("John Lin")
    assert john.seed_phrases(town.scenario) == john.seed_phrases()
    assert "Hailey Johnson" in town.resident("Latoya Williams").seed_phrases()[3]


def test_opening_hours_rules_and_capacity(town: TownSpec) -> None:
    cafe, pub = town.area("Hobbs Cafe"), town.area("The Rose and Crown Pub")
    market, store = town.area("Willow Market and Pharmacy"), town.area("Harvey Oak Supply Store")
    assert (cafe.opens, cafe.closes) == ("08:00", "20:00")
    assert (pub.opens, pub.closes) == ("17:00", "00:00")
    assert market.closes == store.closes == "17:00"
    assert market.is_open(time(16, 59)) and not market.is_open(time(17, 0))
    assert pub.is_open(time(23, 30)) and not pub.is_open(time(12, 0))
    assert town.area("Johnson Park").is_open(time(3, 0))
    assert all(area.rules for area in (cafe, pub, market, store))
    assert town.area("Oak Hill College Dorm").sub_area("bathroom").capacity == 1
    assert any("one person" in rule for rule in town.area("Oak Hill College Dorm").rules)


def test_the_scenario_starts_on_february_13_with_the_party_as_an_event(town: TownSpec) -> None:
    scenario = town.scenario
    assert scenario.start == datetime(2023, 2, 13, 7, 0, tzinfo=UTC)
    assert scenario.minutes_per_tick == 10
    assert {fact.id for fact in scenario.facts} == {"valentines_party", "mayor_election"}
    (party,) = scenario.events
    assert (party.location, party.fact) == ("Hobbs Cafe", "valentines_party")
    assert party.starts_at == datetime(2023, 2, 14, 17, 0, tzinfo=UTC)
    assert party.ends_at == datetime(2023, 2, 14, 19, 0, tzinfo=UTC)


def test_paths_objects_and_lookups(town: TownSpec) -> None:
    paths = town.paths()
    assert {"Hobbs Cafe", "Hobbs Cafe: kitchen", "Lin family's house: kitchen"} <= set(paths)
    assert len(paths) == len(set(paths))
    objects = {(path, obj.name): obj.state for path, obj in town.objects()}
    assert objects[("Hobbs Cafe: counter", "coffee machine")] == "idle"
    assert objects[("Isabella Rodriguez's apartment: kitchen", "stove")] == "off"
    assert town.resident("maria  lopez").name == "Maria Lopez"
    assert town.area("hobbs cafe").name == "Hobbs Cafe"
    with pytest.raises(KeyError):
        town.resident("Nobody Here")
    with pytest.raises(KeyError):
        town.area("Hobbs Attic")


def test_a_folder_path_loads_the_same_town(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    assert load_town(folder) == town
    assert load_town(str(folder)) == town


def test_an_unknown_town_name_lists_the_known_ones() -> None:
    with pytest.raises(PersonaError, match="smallville"):
        load_town("atlantis")


# -- Broken town folders -------------------------------------------------------------------------


def _copy(tmp_path: Path) -> Path:
    source = resources.files("personas") / "smallville"
    folder = tmp_path / "smallville"
    shutil.copytree(str(source), folder)
    return folder


def _edit(file: Path, old: str, new: str, *, after: str = "") -> None:
    """Replace the first `old` that follows `after` in `file`."""
    text = file.read_text("utf-8")
    start = text.index(after)
    at = text.index(old, start)
    file.write_text(text[:at] + new + text[at + len(old) :], "utf-8")


def _problems(folder: Path) -> list[str]:
    with pytest.raises(PersonaError) as caught:
        load_town(folder)
    for problem in caught.value.problems:
        assert problem in str(caught.value)
    return caught.value.problems


def _index(town: TownSpec, name: str) -> int:
    return [resident.name for resident in town.residents].index(name)


def test_a_missing_required_field(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "residents.toml", 'occupation = "history professor at Oak Hill College"\n', "")
    i = _index(town, "Mei Lin")
    assert _problems(folder) == [
        f"residents.toml: residents[{i}].occupation: required field is missing"
    ]


def test_a_home_that_does_not_exist(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _edit(
        folder / "residents.toml", "Oak Hill College Dorm: Maria Lopez's room", "Hobbs Cafe: attic"
    )
    i = _index(town, "Maria Lopez")
    assert _problems(folder) == [
        f"residents.toml: residents[{i}].home: 'Hobbs Cafe: attic' is not a place in town.toml"
    ]


def test_a_bad_time(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "residents.toml", '"08:00"', '"25:99"', after='name = "Eddy Lin"')
    i = _index(town, "Eddy Lin")
    (problem,) = _problems(folder)
    assert problem.startswith(f"residents.toml: residents[{i}].wake_time: '25:99' is not a valid")


def test_a_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    file = folder / "town.toml"
    _edit(file, 'closes = "20:00"', 'closes = "20:00')
    line = file.read_text("utf-8").splitlines().index('closes = "20:00') + 1
    (problem,) = _problems(folder)
    assert problem.startswith(f"town.toml: line {line}, column ")
    assert "TOML syntax error" in problem


def test_a_duplicate_resident(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "residents.toml", 'name = "Mei Lin"', 'name = "John Lin"')
    i = _index(town, "Mei Lin")
    assert _problems(folder) == [
        f"residents.toml: residents[{i}].name: 'John Lin' is already used by residents[0]"
    ]


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        ("scenario.toml", 'resident = "Sam Moore"', 'resident = "Sam Mooore"',
         "scenario.toml: facts[1].resident: 'Sam Mooore' is not a resident in residents.toml"),
        ("scenario.toml", 'location = "Hobbs Cafe"', 'location = "Hobbs Caffe"',
         "scenario.toml: events[0].location: 'Hobbs Caffe' is not a place in town.toml"),
        ("scenario.toml", 'start = "17:00"', 'start = "19:00"',
         "scenario.toml: events[0].end: the event ends when it starts"),
        ("town.toml", 'closes = "20:00"\n', "",
         "town.toml: areas[0].closes: give both opens and closes, or neither"),
        ("town.toml", "capacity = 1\n", "capacity = 0\n",
         "town.toml: areas[0].sub_areas[3].capacity: input should be greater than or equal to 1"),
        ("residents.toml", 'avatar_emoji = "💊"', 'avatar_emoji = "💊"\ncolour = "red"',
         "residents.toml: residents[0].colour: unknown field"),
        ("residents.toml", '"Hobbs Cafe", "Johnson Park",', '"Hobbs Cafe: counter",',
         "residents.toml: residents[0].known_places[2]: 'Hobbs Cafe: counter' is a sub-area"),
        ("residents.toml", 'age = 45', 'age = "45"',
         "residents.toml: residents[0].age: input should be a valid integer"),
    ],
)  # fmt: skip
def test_each_problem_names_file_field_and_reason(
    tmp_path: Path, file: str, old: str, new: str, expected: str
) -> None:
    folder = _copy(tmp_path)
    _edit(folder / file, old, new)
    (problem,) = _problems(folder)
    assert problem.startswith(expected)


def test_a_missing_file_and_a_thin_paragraph(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "scenario.toml").unlink()
    text = (folder / "residents.toml").read_text("utf-8")
    start = text.index('paragraph = """', text.index('name = "Ryan Park"'))
    end = text.index('"""', start + len('paragraph = """')) + 3
    (folder / "residents.toml").write_text(text[:start] + 'paragraph = "one; two;"' + text[end:])
    assert _problems(folder) == [
        f"residents.toml: residents[{_index(town, 'Ryan Park')}].paragraph: has 2 seed phrase(s); "
        "at least 3 are needed, separated by ';'",
        f"scenario.toml: (file): not found in {folder}",
    ]


def test_several_problems_are_reported_at_once(town: TownSpec, tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    residents, scenario = folder / "residents.toml", folder / "scenario.toml"
    _edit(residents, 'occupation = "history professor at Oak Hill College"\n', "")
    _edit(residents, "Oak Hill College Dorm: Maria Lopez's room", "Hobbs Cafe: attic")
    _edit(residents, '"08:00"', '"25:99"', after='name = "Eddy Lin"')
    _edit(residents, 'name = "Klaus Mueller"', 'name = "John Lin"')
    _edit(scenario, 'location = "Hobbs Cafe"', 'location = "Hobbs Cafe: roof"')
    _edit(folder / "town.toml", 'opens = "08:00"\n', "")
    problems = _problems(folder)
    expected = [
        "town.toml: areas[0].opens: give both",
        f"residents.toml: residents[{_index(town, 'Mei Lin')}].occupation: required field",
        f"residents.toml: residents[{_index(town, 'Eddy Lin')}].wake_time: '25:99'",
        f"residents.toml: residents[{_index(town, 'Klaus Mueller')}].name: 'John Lin' is already",
        f"residents.toml: residents[{_index(town, 'Maria Lopez')}].home: 'Hobbs Cafe: attic'",
        "scenario.toml: events[0].location: 'Hobbs Cafe: roof' is not a place",
    ]
    assert len(problems) == len(expected)
    for prefix in expected:
        assert any(problem.startswith(prefix) for problem in problems), prefix
    assert [p.split(":")[0] for p in problems] == [e.split(":")[0] for e in expected]


def test_a_broken_area_does_not_cascade_into_the_places_that_name_it(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "town.toml", 'opens = "08:00"', 'opens = "8 am"')
    assert _problems(folder) == [
        "town.toml: areas[0].opens: '8 am' is not a valid time (HH:MM, from 00:00 to 23:59)"
    ]


def test_a_colon_in_a_name_is_refused(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    _edit(folder / "town.toml", 'name = "kitchen"', 'name = "kitchen: back"')
    (problem,) = _problems(folder)
    assert problem.startswith("town.toml: areas[0].sub_areas[1].name: 'kitchen: back' contains ':'")


# -- Private seed phrases ------------------------------------------------------------------------


def test_private_phrases_are_kept_apart_from_the_seed(town: TownSpec) -> None:
    maria = town.resident("Maria Lopez")
    (crush,) = maria.private_phrases()
    assert crush.startswith("Maria Lopez has a crush on Klaus Mueller")
    assert not any("crush" in p for p in maria.seed_phrases(town.scenario))
    assert town.resident("John Lin").private_phrases() == []


def test_a_secret_may_be_told_to_its_subject_or_a_close_friend_only(town: TownSpec) -> None:
    maria = town.resident("Maria Lopez")
    everyone = [r.name for r in town.residents]
    (crush,) = maria.private_phrases()
    assert maria.close_friends(everyone) == ["Isabella Rodriguez"]
    assert maria.may_confide(crush, "Klaus Mueller", everyone)  # whom it is about
    assert maria.may_confide(crush, "Isabella Rodriguez", everyone)  # a close friend
    assert not maria.may_confide(crush, "Wolfgang Schulz", everyone)  # knows her from the dorm
    assert not maria.may_confide(crush, "Alice", everyone)  # a visitor
    jane = town.resident("Jane Moreno")
    assert "Tom Moreno" in jane.close_friends(everyone)  # married
