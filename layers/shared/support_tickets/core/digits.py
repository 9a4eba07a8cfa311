"""Numbers as the API reads them: ASCII digits, nothing else.

``int()``, ``str.isdigit()`` and a regular expression's ``\\d`` (``str``
patterns match Unicode by default) all take ``"\u0663"`` (Arabic-Indic), ``"\uff13"``
(fullwidth) or ``"\U0001d7d1"`` (mathematical bold) for 3, and ``int()`` also reads ``"1_0"``, ``" 3"`` and
``"+3"``. A client that sends one of those sent no number we document, and
two spellings of one value would be two different strings wherever the text
itself is kept (a key, a cursor, a cache key). So numbers are matched against
:data:`DIGITS` (``[0-9]``) before anything converts them.
"""

from __future__ import annotations

import re
from typing import Final

DIGITS: Final = "[0-9]"
# At most 18 digits: every such number fits in a signed 64-bit integer.
_WHOLE_NUMBER: Final = re.compile(r"-?[0-9]{1,18}")


def whole_number(text: str) -> int | None:
    """``text`` as an integer when it is exactly ``-?[0-9]{1,18}``; otherwise None."""
    return int(text) if _WHOLE_NUMBER.fullmatch(text) else None


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits (``isdigit()`` also takes superscripts and any Unicode digit)."""
    return text.isascii() and text.isdigit()
