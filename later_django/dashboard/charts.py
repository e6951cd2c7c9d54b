"""Geometry of the queue-length graphs, drawn by the template as inline SVG."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .overview import SamplePoint

WIDTH = 720
HEIGHT = 180
LEFT = 56
RIGHT = 8
TOP = 10
BOTTOM = 24


@dataclass(frozen=True)
class Series:
    name: str
    css_class: str
    points: str
    latest: int


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass
class Chart:
    title: str
    start: datetime
    end: datetime
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    top: int = TOP
    baseline: int = HEIGHT - BOTTOM
    y_max: int = 0
    series: list[Series] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    empty: bool = True

    @property
    def y_mid(self) -> int:
        return (self.top + self.baseline) // 2

    @property
    def y_max_half(self) -> int:
        return self.y_max // 2

    @property
    def center_x(self) -> int:
        return (self.left + self.plot_right) // 2

    @property
    def label_y(self) -> int:
        return self.height - 6


def nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1
    magnitude = 1
    while True:
        for step in (1, 2, 5):
            if step * magnitude >= value:
                return step * magnitude
        magnitude *= 10


def build(
    title: str,
    samples: Sequence[SamplePoint],
    start: datetime,
    end: datetime,
    tick_every: timedelta,
    tick_format: str,
) -> Chart:
    """Lay samples out over ``start`` .. ``end``; one polyline per series."""
    chart = Chart(title=title, start=start, end=end)
    span = (end - start).total_seconds() or 1.0
    plot_width = chart.plot_right - chart.left
    plot_height = chart.baseline - chart.top

    def x_of(moment: datetime) -> float:
        offset = min(max((moment - start).total_seconds(), 0.0), span)
        return round(chart.left + plot_width * offset / span, 1)

    tick = start.replace(minute=0, second=0, microsecond=0)
    if tick_every >= timedelta(days=1):
        tick = tick.replace(hour=0)
    while tick <= end:
        if tick >= start:
            chart.ticks.append(Tick(x_of(tick), tick.strftime(tick_format)))
        tick += tick_every
    if not samples:
        return chart
    chart.empty = False
    chart.y_max = nice_ceiling(max(max(s.queued, s.partitioned) for s in samples))

    def y_of(value: int) -> float:
        return round(chart.baseline - plot_height * value / chart.y_max, 1)

    for name, css_class, attr in (
        ("queued", "later-series-queued", "queued"),
        ("partitioned", "later-series-partitioned", "partitioned"),
    ):
        points = " ".join(f"{x_of(s.at)},{y_of(getattr(s, attr))}" for s in samples)
        chart.series.append(Series(name, css_class, points, getattr(samples[-1], attr)))
    return chart
