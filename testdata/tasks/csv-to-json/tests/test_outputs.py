"""Checks /app/people.json against /app/people.csv."""

import csv
import json
from pathlib import Path

OUT = Path("/app/people.json")


def load():
    return json.loads(OUT.read_text())


def rows():
    with open("/app/people.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_output_exists():
    print("looking for", OUT)
    assert OUT.exists(), f"{OUT} does not exist"


def test_one_object_per_row():
    data = load()
    print("objects:", len(data))
    assert isinstance(data, list)
    assert len(data) == len(rows())


def test_fields_and_order():
    data = load()
    for got, want in zip(data, rows()):
        print("row", want["name"])
        assert set(got) == set(want)
        assert got["name"] == want["name"]
        assert got["city"] == want["city"]


def test_age_is_a_number():
    for got, want in zip(load(), rows()):
        assert isinstance(got["age"], int) and not isinstance(got["age"], bool)
        assert got["age"] == int(want["age"])
