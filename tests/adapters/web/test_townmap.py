"""The map's layout: town.toml's boxes kept, the other areas laid out below them."""

from __future__ import annotations

from adapters.web.townmap import layout
from town.views.card import MapPlace
from town.world.persona import MapBox


def cells(places: list[dict[str, int | str]]) -> list[tuple[int, int]]:
    taken = []
    for p in places:
        x, y, w, h = (int(p[k]) for k in "xywh")
        taken += [(x + i, y + j) for i in range(w) for j in range(h)]
    return taken


def test_areas_without_boxes_fill_a_near_square_grid_in_the_files_order() -> None:
    places = layout(MapPlace(f"area {n}", "", None) for n in range(19))
    assert [p["name"] for p in places] == [f"area {n}" for n in range(19)]
    assert max(int(p["x"]) for p in places) == 4  # 5 columns for 19 areas
    assert (places[5]["x"], places[5]["y"]) == (0, 1)
    assert len(set(cells(places))) == len(cells(places)), "no two areas overlap"


def test_boxes_from_the_town_file_are_kept_and_the_rest_go_below() -> None:
    park = MapPlace("Park", "", MapBox(x=1, y=0, w=2, h=2))
    cafe = MapPlace("Cafe", "a cafe", MapBox(x=0, y=0))
    places = layout([park, MapPlace("Home", "", None), cafe, MapPlace("Pub", "", None)])
    by_name = {p["name"]: p for p in places}
    assert by_name["Park"] | {} == {
        "name": "Park",
        "description": "",
        "x": 1,
        "y": 0,
        "w": 2,
        "h": 2,
    }
    assert (by_name["Cafe"]["x"], by_name["Cafe"]["w"], by_name["Cafe"]["description"]) == (
        0,
        1,
        "a cafe",
    )
    assert [(by_name[n]["x"], by_name[n]["y"]) for n in ("Home", "Pub")] == [(0, 2), (1, 2)]
    assert len(set(cells(places))) == len(cells(places))
