import threading

import numpy as np
import pytest

from app.pipeline.ringbuffer import AudioRing, Overrun, ReaderCursor


def test_write_read_with_absolute_index_and_wrap():
    ring = AudioRing(10)
    assert ring.write(np.arange(6, dtype=np.float32)) == 0
    assert ring.write(np.arange(6, 12, dtype=np.float32)) == 6
    assert ring.written == 12 and ring.oldest == 2
    np.testing.assert_array_equal(ring.read(2, 12), np.arange(2, 12))
    np.testing.assert_array_equal(ring.read(8, 11), [8, 9, 10])


def test_contiguous_read_is_a_view_not_a_copy():
    ring = AudioRing(16)
    ring.write(np.ones(8, dtype=np.float32))
    view = ring.read(0, 8)
    assert view.base is not None  # a view into the preallocated buffer


def test_overrun_is_reported_and_reader_skips_ahead():
    ring = AudioRing(8)
    cur = ReaderCursor()
    ring.write(np.arange(20, dtype=np.float32))
    with pytest.raises(Overrun):
        ring.read(0, 4)
    start, data = ring.read_new(cur)
    assert cur.overruns == 1 and start == 12 and len(data) == 8
    assert cur.position == 20


def test_independent_reader_cursors():
    ring = AudioRing(32)
    a, b = ReaderCursor(), ReaderCursor()
    ring.write(np.arange(5, dtype=np.float32))
    assert len(ring.read_new(a)[1]) == 5
    ring.write(np.arange(5, 9, dtype=np.float32))
    assert len(ring.read_new(a)[1]) == 4
    assert len(ring.read_new(b)[1]) == 9


def test_oversized_write_keeps_newest():
    ring = AudioRing(4)
    ring.write(np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(ring.read(6, 10), [6, 7, 8, 9])


def test_wait_for_wakes_on_write_and_close():
    ring = AudioRing(100)
    got = []
    t = threading.Thread(target=lambda: got.append(ring.wait_for(50, timeout=5)))
    t.start()
    ring.write(np.zeros(60, dtype=np.float32))
    t.join(2)
    assert got == [True]
    assert ring.wait_for(1000, timeout=0.01) is False
    ring.close()
    assert ring.wait_for(1000, timeout=5) is False  # returns at once once closed


def test_cannot_read_the_future():
    ring = AudioRing(4)
    with pytest.raises(ValueError):
        ring.read(0, 1)
