"""Reading helpers shared by the reach zoo's reference agents (what a competent reader does).

Every agent of this zoo reads a message through ``normalise`` (NFKC, so full-width digits and
punctuation become ASCII; traditional Chinese characters the agents read become simplified),
then finds numbers, amounts, dates and yes/no answers with the functions here. They are written
by hand for the zoo, not taken from agentprop; fault knobs in the agents switch parts of them off.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata

from rapidfuzz.distance import DamerauLevenshtein

# traditional -> simplified, for the characters the agents' Chinese words use
_TRAD = str.maketrans(
    "電錶讀數餘額還請幫訂單個帳賬號碼郵編後謝確認話費繳計劃辦記錄險賠損壞災竊盜戶媽麼嗎這裡裏過為們條說開關給變換貨錢萬兩買讓對沒問題實際發現時間會從聯繫係證歲歷曆週禮轉結氣樓廚樣煩應該準備產權屬淹議麗學漲價於經歸檔網絡區務處寫稅據報銷歐額貴頓車隊場幣層護補償僅體內機構員華應當飯館飲設備購",
    "电表读数余额还请帮订单个账账号码邮编后谢确认话费缴计划办记录险赔损坏灾窃盗户妈么吗这里里过为们条说开关给变换货钱万两买让对没问题实际发现时间会从联系系证岁历历周礼转结气楼厨样烦应该准备产权属淹议丽学涨价于经归档网络区务处写税据报销欧额贵顿车队场币层护补偿仅体内机构员华应当饭馆饮设备购",
)


def normalise(text: str, *, traditional: bool = True) -> str:
    """NFKC (full-width digits and letters become ASCII), traditional characters made simplified
    (unless ``traditional`` is False), spaces typed between Chinese characters removed."""
    text = unicodedata.normalize("NFKC", text)
    if traditional:
        text = text.translate(_TRAD)
    return re.sub(r"(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])", "", text)


def words(text: str) -> list[str]:
    return re.findall(r"[a-z][a-z']*", text.lower())


def has_word(text: str, targets: tuple[str, ...]) -> bool:
    """Whether a word of ``text`` is one of ``targets`` (a phrase matches as a substring), one
    typo allowed in words of five letters or more."""
    low = text.lower()
    ws = words(low)
    for t in targets:
        if " " in t or not t.isascii():
            if t in low:
                return True
            continue
        for w in ws:
            if w == t or (len(t) >= 5 and len(w) >= 4 and DamerauLevenshtein.distance(w, t) <= 1):
                return True
    return False


# ------------------------------------------------------------------ numbers

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_NUM = re.compile(r"[零〇一二两三四五六七八九十百千万]+")
_EN_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "fifteen": 15, "eighteen": 18, "twenty": 20, "twenty-four": 24, "thirty": 30,
    "a dozen": 12, "a couple of": 2, "a few": 3,
}  # fmt: skip


def zh_number(text: str) -> float | None:
    """A Chinese numeral (两千四百, 一万二千四百八十, 十二) as a number, or None."""
    if not text or not _ZH_NUM.fullmatch(text):
        return None
    total, section, digit = 0, 0, None
    for ch in text:
        if ch in _ZH_DIGITS:
            digit = _ZH_DIGITS[ch]
        elif ch in _ZH_UNITS:
            section += (1 if digit is None else digit) * _ZH_UNITS[ch]
            digit = None
        elif ch == "万":
            total += (section + (digit or 0)) * 10000
            section, digit = 0, None
    return float(total + section + (digit or 0))


# 12,480 / 12 480 / 1.2k / 2.4万 / 2千4 / 12480.50
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.\-/:])(\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?: \d{3})+(?!\d)|\d+)(\.\d+)?\s?((?:k|K)(?![A-Za-z])|thousand|grand|万|千)?(?:(?<=千)(\d))?(?![\d/])"
    r"|([零〇一二两三四五六七八九十百千万]+)"
)


def numbers(text: str, *, thousands: bool = True, k_suffix: bool = True, zh: bool = True) -> list[tuple[float, int]]:
    """Numbers in ``text`` as ``(value, start)`` in order: digits with thousands separators,
    decimals, a k / thousand / 万 / 千 multiplier, and Chinese numerals. Each switch turns one
    notation off (a fault knob)."""
    out: list[tuple[float, int]] = []
    for m in _NUMBER.finditer(text):
        if m.group(5):
            if zh and (v := zh_number(m.group(5))) and m.group(5) not in ("一", "两", "万", "千", "百", "千万", "万一"):
                out.append((v, m.start()))
            continue
        digits = m.group(1)
        if ("," in digits or " " in digits) and not thousands:
            digits = re.split(r"[, ]", digits)[0]
            out.append((float(digits), m.start()))
            continue
        value = float(digits.replace(",", "").replace(" ", "") + (m.group(2) or ""))
        mult = m.group(3)
        if mult and k_suffix:
            value *= {"k": 1000, "K": 1000, "thousand": 1000, "grand": 1000, "万": 10000, "千": 1000}[mult]
            if m.group(4):
                value += int(m.group(4)) * 100
        out.append((value, m.start()))
    return out


def word_number(text: str) -> float | None:
    """An English number word (six, a dozen) in ``text``, or None."""
    low = text.lower()
    for w, v in sorted(_EN_NUMBERS.items(), key=lambda kv: -len(kv[0])):
        if re.search(rf"\b{re.escape(w)}\b", low):
            return float(v)
    return None


# ------------------------------------------------------------------ dates

_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
_WEEKDAYS = {d: i for i, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}


def _safe(y: int, m: int, d: int) -> dt.date | None:
    try:
        return dt.date(y, m, d)
    except ValueError:
        return None


def _year(y: str | None, today: dt.date) -> int:
    if not y:
        return today.year
    n = int(y)
    return 2000 + n if n < 100 else n


def _past(date: dt.date | None, today: dt.date, explicit_year: bool) -> dt.date | None:
    """A date given without a year that would lie in the future is last year's."""
    if date is not None and not explicit_year and date > today:
        return _safe(date.year - 1, date.month, date.day)
    return date


def parse_date(text: str, today: dt.date, *, month_first: bool = False, relative: bool = True) -> dt.date | None:
    """The first date written in ``text``: ISO, day-first numeric (20/11/2026, 20.11, 20-11-26),
    with a month name (20 Nov, November 20th, 2026), Chinese (11月20日), or relative to ``today``
    (yesterday, 3 days ago, last Friday, 昨天, 上周五). ``month_first`` reads numeric dates the US
    way and ``relative`` False ignores relative dates (fault knobs)."""
    low = text.lower()
    if m := re.search(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", low):
        return _safe(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := re.search(r"(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]?", text):
        return _past(_safe(_year(m.group(1), today), int(m.group(2)), int(m.group(3))), today, bool(m.group(1)))
    # 20/11, 20-11-2026, 20.11.2026 (a dotted date needs its year: 2.4 is a number)
    if m := re.search(r"\b(\d{1,2})([/\-])(\d{1,2})(?:\2(\d{2,4}))?\b|\b(\d{1,2})\.(\d{1,2})\.(\d{2,4})\b", low):
        g = m.groups()
        a, b, y = (int(g[0]), int(g[2]), g[3]) if g[0] else (int(g[4]), int(g[5]), g[6])
        year = _year(y, today)
        if month_first:  # the US reading only, no fallback
            return _past(_safe(year, a, b), today, bool(y))
        # day-first (the spec's convention); 11/20/2026 cannot be day-first, so it is month-first
        return _past(_safe(year, b, a) or _safe(year, a, b), today, bool(y))
    month_names = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
    if m := re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{month_names}(?:,?\s+(\d{{4}}))?", low):
        return _past(_safe(_year(m.group(3), today), _MONTHS[m.group(2)[:3]], int(m.group(1))), today, bool(m.group(3)))
    if m := re.search(rf"\b{month_names}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?", low):
        return _past(_safe(_year(m.group(3), today), _MONTHS[m.group(1)[:3]], int(m.group(2))), today, bool(m.group(3)))
    if not relative:
        return None
    if re.search(r"\bday before yesterday\b|前天", text.lower()):
        return today - dt.timedelta(days=2)
    if re.search(r"\byesterday\b|\blast night\b|昨天|昨晚", low):
        return today - dt.timedelta(days=1)
    if re.search(r"\b(today|this morning|this afternoon|earlier today|tonight)\b|今天|今早|今晚", low):
        return today
    if m := re.search(r"\b(\d+|a|one|two|three|four|five|six|seven|ten)\s+(day|week)s?\s+ago\b", low):
        n = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}.get(m.group(1))
        k = n if n is not None else int(m.group(1))
        return today - dt.timedelta(days=k * (7 if m.group(2) == "week" else 1))
    if m := re.search(r"(\d+|[一二两三四五六七八九十]+)\s*天(?:以)?前", text):
        k = int(m.group(1)) if m.group(1).isdigit() else int(zh_number(m.group(1)) or 0)
        return today - dt.timedelta(days=k)
    if m := re.search(r"\b(?:last|on|this past)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", low):
        back = (today.weekday() - _WEEKDAYS[m.group(1)]) % 7 or 7
        return today - dt.timedelta(days=back)
    if m := re.search(r"上(?:个)?(?:周|星期|礼拜)([一二三四五六日天])", text):
        monday_this_week = today - dt.timedelta(days=today.weekday())
        return monday_this_week - dt.timedelta(days=7) + dt.timedelta(days=_ZH_WEEKDAYS[m.group(1)])
    if re.search(r"\blast week\b|上周|上星期", low):
        return today - dt.timedelta(days=7)
    return None


# ------------------------------------------------------------------ yes / no

_NOT_NEGATIVE = re.compile(r"\b(no problem|no worries|why not|no doubt|not a problem)\b|没问题|没事", re.I)
_UNSURE = re.compile(
    r"\b(not (so |too |really |quite |entirely )?sure|unsure|i don'?t know|maybe|perhaps|what happens|what would|how (much|long))\b"
    r"|不确定|不太确定|不知道|再想想|考虑一下|会怎样|怎么样\?|吗\s*[?？]?$",
    re.I,
)
_NEGATIVE = re.compile(
    r"\b(no|nope|nah|not now|not yet|not today|rather not|prefer not|don'?t|do not|let'?s not|i'?ll pass|pass on it|hold off|"
    r"leave it|keep (it|the|my)|never ?mind|changed my mind|forget it|wait|stop|scratch that|cancel that|negative)\b"
    r"|不要|不用|不了|别|算了|先不|不行|不好|不必|暂时不|还是不",
    re.I,
)
_POSITIVE = re.compile(
    r"\b(yes|yeah|yep|yup|ya|sure|ok|okay|k|go ahead|go for it|do it|please do|sounds good|confirm(ed)?|proceed|absolutely|"
    r"of course|fine|that'?s right|correct|definitely|let'?s do it|alright|all right|right|affirmative|why not|please)\b"
    r"|👍|是|好|行|可以|确认|没问题|对|嗯|要的|办吧|来吧|同意|取消吧|提交吧|就这样",
    re.I,
)


def yes_no(text: str, *, colloquial: bool = True, polite_refusals: bool = True) -> str:
    """``"yes"``, ``"no"`` or ``"unclear"`` for an answer to a yes/no question. A no (also a
    polite one: "I'd rather not", "I'll pass", 算了) wins over a yes; "not sure" is unclear.
    ``colloquial`` False accepts only plain yes/confirm words (a fault knob); ``polite_refusals``
    False reads only "no"-words as a refusal (a fault knob)."""
    t = normalise(text)
    cleaned = _NOT_NEGATIVE.sub(" yes ", t)
    if _UNSURE.search(cleaned) and not re.search(r"\b(yes|no)\b", cleaned, re.I):
        return "unclear"
    negative = _NEGATIVE if polite_refusals else re.compile(r"\b(no|nope|don'?t|do not)\b|不要|不用|别", re.I)
    if negative.search(cleaned):
        return "no"
    positive = _POSITIVE if colloquial else re.compile(r"\b(yes|yeah|yep|confirm(ed)?)\b|是的|确认", re.I)
    if positive.search(cleaned):
        return "yes"
    return "no" if not polite_refusals and not colloquial else "unclear"


_NEGATION_BEFORE = re.compile(
    r"(\b(don'?t|do not|doesn'?t|not|never|no need to|without|isn'?t|i'?m not|am not|not trying to|not looking to|rather than|instead of)\b"
    r"[^.,;!?]{0,30}$)|(不想|不要|不用|不是要|并不|不打算|没打算|不需要)[^，。；！？]{0,8}$",
    re.I,
)


def negated_at(text: str, start: int) -> bool:
    """Whether the word starting at ``start`` is negated by what comes just before it in its clause."""
    return _NEGATION_BEFORE.search(text[:start]) is not None
