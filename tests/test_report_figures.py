"""report/figures.py's drawing machinery: the same pixels with its shortcuts as without."""

from __future__ import annotations

import gc

import matplotlib.axis
import matplotlib.text
import numpy as np
import pytest

from xtalk.report import figures as fg


def _figure(xlim=None, title="a title"):
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6, 2.5))
    x = np.geomspace(1, 1e6, 400)
    a1.plot(x, 1 / x, label="tail")
    a1.set_yscale("log")
    a1.set_title(title)
    a1.legend()
    a2.plot(np.arange(100), np.sin(np.arange(100) / 7.0), label="sine")
    a2.set_xlabel("job")
    a2.set_ylabel("value (ms)")
    a2.set_xticks([0, 50, 99], ["first", "middle", "last"], rotation=45, ha="right")
    if xlim is not None:
        a2.set_xlim(*xlim)
    fig.suptitle("suptitle")
    return fig


def _pixels(fig):
    import matplotlib.pyplot as plt

    fig.get_layout_engine().execute(fig)
    fig.canvas.draw()
    out = np.asarray(fig.canvas.buffer_rgba()).copy()
    plt.close(fig)
    return out


def test_ticks_and_layouts_once_draw_the_same_pixels():
    plain = _pixels(_figure())
    with fg.measured_once():
        once = _pixels(_figure())
    assert np.array_equal(plain, once)


def test_ticks_and_layouts_are_computed_again_when_their_inputs_change():
    import matplotlib.pyplot as plt

    expected = _pixels(_figure(xlim=(-40, 300), title="another, longer title"))
    with fg.measured_once():
        fig = _figure()
        fig.get_layout_engine().execute(fig)
        fig.canvas.draw()  # ticks and layouts of the first limits and title remembered
        fig.axes[1].set_xlim(-40, 300)
        fig.axes[0].set_title("another, longer title")
        changed = _pixels(fig)
    assert np.array_equal(expected, changed)
    plt.close("all")


def test_matplotlibs_methods_are_restored_even_on_error():
    ticks, layout = matplotlib.axis.Axis._update_ticks, matplotlib.text.Text._get_layout
    with pytest.raises(RuntimeError), fg.measured_once():
        assert matplotlib.axis.Axis._update_ticks is not ticks
        raise RuntimeError("a figure failed")
    assert matplotlib.axis.Axis._update_ticks is ticks and matplotlib.text.Text._get_layout is layout


def test_gc_paused_pauses_and_restores_the_collectors_state():
    seen = []

    @fg.gc_paused
    def draw(fail=False):
        seen.append(gc.isenabled())
        if fail:
            raise ValueError("bad figure")
        return 7

    assert gc.isenabled()
    assert draw() == 7 and seen == [False] and gc.isenabled()
    with pytest.raises(ValueError):
        draw(fail=True)
    assert gc.isenabled()
    gc.disable()
    try:
        draw()
        assert not gc.isenabled()  # paused by someone else: left paused
    finally:
        gc.enable()
