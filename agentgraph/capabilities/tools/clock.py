"""now: the current local time, so the model need not guess the date."""

from datetime import datetime

from langchain_core.tools import BaseTool, tool


def format_now(moment: datetime) -> str:
    """Render a timezone-aware time as ISO-8601 plus weekday and zone name.

    Args:
        moment: An aware datetime.

    Returns:
        E.g. ``2025-03-04T09:15:00+01:00 (Tuesday, CET)``.
    """
    zone = moment.tzname() or ""
    extra = f", {zone}" if zone and not zone.startswith(("+", "-", "UTC+", "UTC-")) else ""
    return f"{moment.isoformat(timespec='seconds')} ({moment.strftime('%A')}{extra})"


def make_clock_tool() -> BaseTool:
    """Build the now tool.

    Returns:
        The tool.
    """

    @tool("now")
    def now() -> str:
        """Current local date and time (ISO-8601, weekday)."""
        return format_now(datetime.now().astimezone())

    return now
