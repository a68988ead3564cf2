"""Each modality's units: the events of a replay (replay_units) and the units a memory's
citation covers (cited_units), with the refusals of an extent that does not lie in its source."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.modalities import modalities

T0 = pd.Timestamp("2023-05-08T13:56:00Z")


def seg(rows: list[dict], **common) -> pd.DataFrame:
    frame = pd.DataFrame([{**common, **r} for r in rows])
    frame["seq"] = range(len(frame))
    frame["observed_at"] = pd.to_datetime(frame.get("observed_at", T0), utc=True)
    return frame


def test_conversation_units_are_turns():
    m = modalities()["conversation"]
    s = seg([{"turn": t, "text": f"A: turn {t}"} for t in (1, 2, 3, 4)], source_id="c:s1")
    assert m.replay_units(s)["extent"].tolist() == [{"turn": 1}, {"turn": 2}, {"turn": 3}, {"turn": 4}]
    units = m.cited_units({"turn_start": 2, "turn_end": 3}, s)
    assert units["extent"].tolist() == [{"turn": 2}, {"turn": 3}] and units["text"].tolist() == ["A: turn 2", "A: turn 3"]
    with pytest.raises(ValueError, match=r"turn 9 is not a turn of the session \(turns 1..4\)"):
        m.cited_units({"turn_start": 2, "turn_end": 9}, s)
    with pytest.raises(ValueError, match="extent must have keys"):
        m.cited_units({"page": 1}, s)


def test_pdf_units_are_pages_of_joined_blocks():
    m = modalities()["pdf"]
    s = seg([{"page": 1, "block": 0, "text": "one"}, {"page": 1, "block": 1, "text": "two"}, {"page": 2, "block": 0, "text": ""}],
            source_id="d:x.pdf")
    events = m.replay_units(s)
    assert events["extent"].tolist() == [{"page": 1}, {"page": 2}] and events["text"].tolist() == ["one\ntwo", ""]
    assert m.cited_units({"page": 2}, s)["extent"].tolist() == [{"page": 2}]
    with pytest.raises(ValueError, match="page 3 beyond the document's 2 pages"):
        m.cited_units({"page_start": 1, "page_end": 3}, s)


def test_code_events_are_files_and_cited_units_lines():
    m = modalities()["code"]
    s = seg([{"path": "a.py", "text": "def f():\n    return 1\n", "n_lines": 2}, {"path": "b.py", "text": "x = 1\n", "n_lines": 1}],
            source_id="r:tree")
    assert m.replay_units(s)["extent"].tolist() == [{"path": "a.py", "line_start": 1, "line_end": 2},
                                                   {"path": "b.py", "line_start": 1, "line_end": 1}]
    units = m.cited_units({"path": "a.py", "line_start": 1, "line_end": 2}, s)
    assert units["extent"].tolist() == [{"path": "a.py", "line": 1}, {"path": "a.py", "line": 2}]
    assert units["text"].tolist() == ["def f():", "    return 1"]
    with pytest.raises(ValueError, match="line 3 outside 'a.py'"):
        m.cited_units({"path": "a.py", "line": 3}, s)
    with pytest.raises(ValueError, match="path 'c.py' not in the source tree"):
        m.cited_units({"path": "c.py", "line": 1}, s)


def test_video_units_are_cues_clipped_to_the_window():
    m = modalities()["video"]
    s = seg([{"t_start": 0.0, "t_end": 4.0, "text": "a"}, {"t_start": 4.0, "t_end": 8.0, "text": "b"}], source_id="v:1")
    assert len(m.replay_units(s)) == 2
    units = m.cited_units({"t_start": 2, "t_end": 5}, s)
    assert units["extent"].tolist() == [{"t_start": 2.0, "t_end": 4.0}, {"t_start": 4.0, "t_end": 5.0}]
    with pytest.raises(ValueError, match="at or after the video's end"):
        m.cited_units({"t_start": 9, "t_end": 10}, s)


def test_screenshot_units_are_ocr_boxes_in_the_cited_box_or_the_box_itself():
    m = modalities()["ui_screenshot"]
    s = seg([{"x0": 10.0, "y0": 10.0, "x1": 50.0, "y1": 20.0, "text": "Save", "has_text": True},
             {"x0": 60.0, "y0": 10.0, "x1": 90.0, "y1": 20.0, "text": "Open", "has_text": True}],
            source_id="s:1", width=100, height=100)
    assert m.replay_units(s)["extent"].tolist() == [{"bbox": [0, 0, 100, 100]}]
    units = m.cited_units({"bbox": [0, 0, 55, 30]}, s)
    assert units["text"].tolist() == ["Save"] and units["extent"].tolist() == [{"bbox": [10.0, 10.0, 50.0, 20.0]}]
    blank = m.cited_units({"bbox": [0, 50, 40, 90]}, s)
    assert blank["text"].tolist() == [""] and blank["extent"].tolist() == [{"bbox": [0.0, 50.0, 40.0, 90.0]}]
    with pytest.raises(ValueError, match="outside the 100x100 screenshot"):
        m.cited_units({"bbox": [0, 0, 120, 30]}, s)


def test_image_unit_is_the_photo():
    m = modalities()["image"]
    s = seg([{"text": "", "width": 640, "height": 480}], source_id="i:1")
    assert m.replay_units(s)["extent"].tolist() == [{}]
    assert len(m.cited_units({}, s)) == 1
    with pytest.raises(ValueError, match="must be"):
        m.cited_units({"bbox": [0, 0, 1, 1]}, s)
