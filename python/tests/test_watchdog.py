"""The routing watchdog (kvring.route.Watchdog) that gives up owners which do not answer in time."""

import threading

from kvring.route import Watchdog


def test_callbacks_run_in_deadline_order_and_cancelled_ones_never():
    w = Watchdog()
    try:
        ran: list[str] = []
        done = threading.Event()
        w.schedule(0.2, lambda: (ran.append("late"), done.set()))
        cancelled = w.schedule(0.05, lambda: ran.append("cancelled"))
        w.schedule(0.1, lambda: ran.append("early"))
        cancelled[0] = None
        assert done.wait(10), "the watchdog never ran the last callback"
        assert ran == ["early", "late"]
    finally:
        w.close()


def test_a_failing_callback_does_not_stop_the_watchdog():
    w = Watchdog()
    try:
        done = threading.Event()
        w.schedule(0, lambda: 1 / 0)
        w.schedule(0.01, done.set)
        assert done.wait(10)
    finally:
        w.close()
