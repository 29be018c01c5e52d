"""Function-writing problems of the ``code`` environment, tiers 2 (medium) and 3 (hard).

Same fields as ``code_problems.TIER1``; written for verigym.
"""

from __future__ import annotations

__all__ = ["TIER2", "TIER3"]

TIER2: list[dict[str, object]] = [
    {
        "id": "c16", "tier": 2, "entry_point": "run_length_encode",
        "prompt": "Write `run_length_encode(s: str) -> str` that replaces each run of a repeated character by the character followed by the run length, e.g. 'aaabcc' -> 'a3b1c2'.",
        "solution": "def run_length_encode(s):\n    out = []\n    i = 0\n    while i < len(s):\n        j = i\n        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out.append(s[i] + str(j - i))\n        i = j\n    return ''.join(out)\n",
        "tests": "assert run_length_encode('aaabcc') == 'a3b1c2'\nassert run_length_encode('') == ''\nassert run_length_encode('z') == 'z1'\nassert run_length_encode('aaaaaaaaaaaa') == 'a12'\nassert run_length_encode('abab') == 'a1b1a1b1'\n",
    },
    {
        "id": "c17", "tier": 2, "entry_point": "balanced_brackets",
        "prompt": "Write `balanced_brackets(s: str) -> bool`: True when every (, [ and { in `s` is closed by the matching bracket in the right order; other characters are ignored.",
        "solution": "def balanced_brackets(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack\n",
        "tests": "assert balanced_brackets('([]{})')\nassert not balanced_brackets('([)]')\nassert not balanced_brackets('((')\nassert balanced_brackets('a(b)c')\nassert not balanced_brackets(')(')\nassert balanced_brackets('')\n",
    },
    {
        "id": "c18", "tier": 2, "entry_point": "merge_sorted",
        "prompt": "Write `merge_sorted(a: list[int], b: list[int]) -> list[int]` merging two ascending lists into one ascending list (keep duplicates).",
        "solution": "def merge_sorted(a, b):\n    i = j = 0\n    out = []\n    while i < len(a) and j < len(b):\n        if a[i] <= b[j]:\n            out.append(a[i]); i += 1\n        else:\n            out.append(b[j]); j += 1\n    return out + a[i:] + b[j:]\n",
        "tests": "assert merge_sorted([1, 3, 5], [2, 3, 6]) == [1, 2, 3, 3, 5, 6]\nassert merge_sorted([], [1]) == [1]\nassert merge_sorted([], []) == []\nassert merge_sorted([-2, 0], [-5, 10]) == [-5, -2, 0, 10]\n",
    },
    {
        "id": "c19", "tier": 2, "entry_point": "anagram_groups",
        "prompt": "Write `anagram_groups(words: list[str]) -> list[list[str]]` grouping words that are anagrams of each other. Each group keeps the input order; groups are ordered by the position of their first word.",
        "solution": "def anagram_groups(words):\n    groups = {}\n    for w in words:\n        groups.setdefault(''.join(sorted(w)), []).append(w)\n    return list(groups.values())\n",
        "tests": "assert anagram_groups(['eat', 'tea', 'tan', 'ate', 'nat', 'bat']) == [['eat', 'tea', 'ate'], ['tan', 'nat'], ['bat']]\nassert anagram_groups([]) == []\nassert anagram_groups(['a']) == [['a']]\n",
    },
    {
        "id": "c20", "tier": 2, "entry_point": "roman_to_int",
        "prompt": "Write `roman_to_int(s: str) -> int` converting a Roman numeral (I, V, X, L, C, D, M with subtractive pairs like IV and CM) to an integer.",
        "solution": "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n    for i, c in enumerate(s):\n        if i + 1 < len(s) and v[c] < v[s[i + 1]]:\n            total -= v[c]\n        else:\n            total += v[c]\n    return total\n",
        "tests": "assert roman_to_int('III') == 3\nassert roman_to_int('IV') == 4\nassert roman_to_int('MCMXCIV') == 1994\nassert roman_to_int('LVIII') == 58\nassert roman_to_int('MMXXVI') == 2026\n",
    },
    {
        "id": "c21", "tier": 2, "entry_point": "int_to_roman",
        "prompt": "Write `int_to_roman(n: int) -> str` converting 1 <= n <= 3999 to a Roman numeral in standard form (subtractive pairs IV, IX, XL, XC, CD, CM).",
        "solution": "def int_to_roman(n):\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n    for value, sym in table:\n        while n >= value:\n            out += sym\n            n -= value\n    return out\n",
        "tests": "assert int_to_roman(3) == 'III'\nassert int_to_roman(1994) == 'MCMXCIV'\nassert int_to_roman(3999) == 'MMMCMXCIX'\nassert int_to_roman(44) == 'XLIV'\n",
    },
    {
        "id": "c22", "tier": 2, "entry_point": "flatten",
        "prompt": "Write `flatten(nested: list) -> list` that flattens arbitrarily nested lists into one list, keeping the order of the elements (only lists are flattened; tuples and strings are kept as elements).",
        "solution": "def flatten(nested):\n    out = []\n    for x in nested:\n        if isinstance(x, list):\n            out.extend(flatten(x))\n        else:\n            out.append(x)\n    return out\n",
        "tests": "assert flatten([1, [2, [3, [4]], 5]]) == [1, 2, 3, 4, 5]\nassert flatten([]) == []\nassert flatten([[], [[]]]) == []\nassert flatten(['ab', (1, 2), [3]]) == ['ab', (1, 2), 3]\n",
    },
    {
        "id": "c23", "tier": 2, "entry_point": "caesar_cipher",
        "prompt": "Write `caesar_cipher(text: str, shift: int) -> str` shifting each ASCII letter by `shift` places in the alphabet (wrapping around, keeping case; `shift` may be negative or larger than 26); other characters stay as they are.",
        "solution": "def caesar_cipher(text, shift):\n    out = []\n    for c in text:\n        if 'a' <= c <= 'z':\n            out.append(chr((ord(c) - 97 + shift) % 26 + 97))\n        elif 'A' <= c <= 'Z':\n            out.append(chr((ord(c) - 65 + shift) % 26 + 65))\n        else:\n            out.append(c)\n    return ''.join(out)\n",
        "tests": "assert caesar_cipher('abc', 1) == 'bcd'\nassert caesar_cipher('xyz', 3) == 'abc'\nassert caesar_cipher('Hello, World!', 13) == 'Uryyb, Jbeyq!'\nassert caesar_cipher('abc', -1) == 'zab'\nassert caesar_cipher('Zz', 52) == 'Zz'\n",
    },
    {
        "id": "c24", "tier": 2, "entry_point": "binary_search",
        "prompt": "Write `binary_search(items: list[int], target: int) -> int` returning the index of `target` in the ascending list `items` (any index if it occurs several times), or -1 when it is absent. It must run in O(log n).",
        "solution": "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if items[mid] == target:\n            return mid\n        if items[mid] < target:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
        "tests": "assert binary_search([1, 3, 5, 7, 9], 7) == 3\nassert binary_search([1, 3, 5], 4) == -1\nassert binary_search([], 1) == -1\nassert binary_search(list(range(0, 2000000, 2)), 1999998) == 999999\n",
    },
    {
        "id": "c25", "tier": 2, "entry_point": "prime_factors",
        "prompt": "Write `prime_factors(n: int) -> list[int]` returning the prime factors of n >= 2 in ascending order, with multiplicity (12 -> [2, 2, 3]).",
        "solution": "def prime_factors(n):\n    out = []\n    d = 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n            n //= d\n        d += 1\n    if n > 1:\n        out.append(n)\n    return out\n",
        "tests": "assert prime_factors(12) == [2, 2, 3]\nassert prime_factors(13) == [13]\nassert prime_factors(1024) == [2] * 10\nassert prime_factors(600851475143) == [71, 839, 1471, 6857]\n",
    },
    {
        "id": "c26", "tier": 2, "entry_point": "matrix_transpose",
        "prompt": "Write `matrix_transpose(m: list[list[int]]) -> list[list[int]]` returning the transpose of a rectangular matrix (an empty matrix gives []).",
        "solution": "def matrix_transpose(m):\n    return [list(row) for row in zip(*m)]\n",
        "tests": "assert matrix_transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]\nassert matrix_transpose([]) == []\nassert matrix_transpose([[7]]) == [[7]]\n",
    },
    {
        "id": "c27", "tier": 2, "entry_point": "word_wrap",
        "prompt": "Write `word_wrap(text: str, width: int) -> list[str]` greedily packing the words of `text` into lines of at most `width` characters (words joined by single spaces; a word longer than `width` gets a line of its own).",
        "solution": "def word_wrap(text, width):\n    lines, cur = [], ''\n    for w in text.split():\n        if not cur:\n            cur = w\n        elif len(cur) + 1 + len(w) <= width:\n            cur += ' ' + w\n        else:\n            lines.append(cur)\n            cur = w\n    if cur:\n        lines.append(cur)\n    return lines\n",
        "tests": "assert word_wrap('the quick brown fox', 10) == ['the quick', 'brown fox']\nassert word_wrap('', 5) == []\nassert word_wrap('abcdefgh ij', 4) == ['abcdefgh', 'ij']\nassert word_wrap('a b c', 5) == ['a b c']\n",
    },
    {
        "id": "c28", "tier": 2, "entry_point": "most_common_char",
        "prompt": "Write `most_common_char(s: str) -> str` returning the character that occurs most often in the non-empty string `s`; on a tie, the one that appears first in `s`.",
        "solution": "def most_common_char(s):\n    counts = {}\n    for c in s:\n        counts[c] = counts.get(c, 0) + 1\n    best = max(counts.values())\n    return next(c for c in s if counts[c] == best)\n",
        "tests": "assert most_common_char('abracadabra') == 'a'\nassert most_common_char('abcabc') == 'a'\nassert most_common_char('zzyy') == 'z'\nassert most_common_char('q') == 'q'\nassert most_common_char('xyyx') == 'x'\n",
    },
    {
        "id": "c29", "tier": 2, "entry_point": "running_median",
        "prompt": "Write `running_median(nums: list[int]) -> list[float]` returning, after each element, the median of the elements seen so far (the mean of the two middle values when their count is even).",
        "solution": "def running_median(nums):\n    seen, out = [], []\n    for x in nums:\n        seen.append(x)\n        s = sorted(seen)\n        k = len(s)\n        out.append(float(s[k // 2]) if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2)\n    return out\n",
        "tests": "assert running_median([5, 15, 1, 3]) == [5.0, 10.0, 5.0, 4.0]\nassert running_median([]) == []\nassert running_median([2, 2]) == [2.0, 2.0]\n",
    },
    {
        "id": "c30", "tier": 2, "entry_point": "is_valid_ipv4",
        "prompt": "Write `is_valid_ipv4(s: str) -> bool`: True for four decimal numbers 0-255 separated by dots, with no leading zeros (except '0' itself), no signs and no spaces.",
        "solution": "def is_valid_ipv4(s):\n    parts = s.split('.')\n    if len(parts) != 4:\n        return False\n    for p in parts:\n        if not p.isdigit() or not p.isascii() or (len(p) > 1 and p[0] == '0') or int(p) > 255:\n            return False\n    return True\n",
        "tests": "assert is_valid_ipv4('192.168.0.1')\nassert not is_valid_ipv4('256.1.1.1')\nassert not is_valid_ipv4('01.1.1.1')\nassert not is_valid_ipv4('1.1.1')\nassert is_valid_ipv4('0.0.0.0')\nassert not is_valid_ipv4('1.1.1.-1')\nassert not is_valid_ipv4(' 1.1.1.1')\n",
    },
]  # fmt: skip

TIER3: list[dict[str, object]] = [
    {
        "id": "c31", "tier": 3, "entry_point": "longest_common_subsequence",
        "prompt": "Write `longest_common_subsequence(a: str, b: str) -> int` returning the length of the longest common subsequence of `a` and `b` (strings up to 2000 characters; it must finish in well under a second).",
        "solution": "def longest_common_subsequence(a, b):\n    prev = [0] * (len(b) + 1)\n    for x in a:\n        cur = [0]\n        for j, y in enumerate(b):\n            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))\n        prev = cur\n    return prev[-1]\n",
        "tests": "assert longest_common_subsequence('abcde', 'ace') == 3\nassert longest_common_subsequence('abc', 'def') == 0\nassert longest_common_subsequence('', 'x') == 0\nassert longest_common_subsequence('ab' * 400, 'ba' * 400) == 799\n",
    },
    {
        "id": "c32", "tier": 3, "entry_point": "edit_distance",
        "prompt": "Write `edit_distance(a: str, b: str) -> int` returning the Levenshtein distance (insertions, deletions and substitutions each cost 1).",
        "solution": "def edit_distance(a, b):\n    prev = list(range(len(b) + 1))\n    for i, x in enumerate(a, 1):\n        cur = [i]\n        for j, y in enumerate(b, 1):\n            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))\n        prev = cur\n    return prev[-1]\n",
        "tests": "assert edit_distance('kitten', 'sitting') == 3\nassert edit_distance('', 'abc') == 3\nassert edit_distance('flaw', 'lawn') == 2\nassert edit_distance('same', 'same') == 0\n",
    },
    {
        "id": "c33", "tier": 3, "entry_point": "coin_change",
        "prompt": "Write `coin_change(coins: list[int], amount: int) -> int` returning the fewest coins (unlimited supply of each positive denomination) that sum to `amount`, or -1 when it cannot be done. amount can be up to 10000.",
        "solution": "def coin_change(coins, amount):\n    inf = amount + 1\n    best = [0] + [inf] * amount\n    for a in range(1, amount + 1):\n        for c in coins:\n            if c <= a and best[a - c] + 1 < best[a]:\n                best[a] = best[a - c] + 1\n    return best[amount] if best[amount] < inf else -1\n",
        "tests": "assert coin_change([1, 2, 5], 11) == 3\nassert coin_change([2], 3) == -1\nassert coin_change([1], 0) == 0\nassert coin_change([186, 419, 83, 408], 6249) == 20\nassert coin_change([3, 7], 10000) == 1432\n",
    },
    {
        "id": "c34", "tier": 3, "entry_point": "topological_sort",
        "prompt": "Write `topological_sort(n: int, edges: list[tuple[int, int]]) -> list[int] | None` ordering nodes 0..n-1 so that for every edge (u, v) u comes before v; among the nodes available at each step take the smallest. Return None when the graph has a cycle.",
        "solution": "import heapq\n\ndef topological_sort(n, edges):\n    indeg = [0] * n\n    adj = [[] for _ in range(n)]\n    for u, v in edges:\n        adj[u].append(v)\n        indeg[v] += 1\n    heap = [i for i in range(n) if indeg[i] == 0]\n    heapq.heapify(heap)\n    out = []\n    while heap:\n        u = heapq.heappop(heap)\n        out.append(u)\n        for v in adj[u]:\n            indeg[v] -= 1\n            if indeg[v] == 0:\n                heapq.heappush(heap, v)\n    return out if len(out) == n else None\n",
        "tests": "assert topological_sort(4, [(0, 1), (0, 2), (1, 3), (2, 3)]) == [0, 1, 2, 3]\nassert topological_sort(3, [(2, 1), (1, 0)]) == [2, 1, 0]\nassert topological_sort(2, [(0, 1), (1, 0)]) is None\nassert topological_sort(3, []) == [0, 1, 2]\nassert topological_sort(3, [(2, 0)]) == [1, 2, 0]\n",
    },
    {
        "id": "c35", "tier": 3, "entry_point": "shortest_path",
        "prompt": "Write `shortest_path(n: int, edges: list[tuple[int, int, int]], source: int) -> list[int]` returning the shortest distance from `source` to each node 0..n-1 over directed edges (u, v, weight >= 0); unreachable nodes get -1.",
        "solution": "import heapq\n\ndef shortest_path(n, edges, source):\n    adj = [[] for _ in range(n)]\n    for u, v, w in edges:\n        adj[u].append((v, w))\n    dist = [None] * n\n    heap = [(0, source)]\n    while heap:\n        d, u = heapq.heappop(heap)\n        if dist[u] is not None:\n            continue\n        dist[u] = d\n        for v, w in adj[u]:\n            if dist[v] is None:\n                heapq.heappush(heap, (d + w, v))\n    return [-1 if d is None else d for d in dist]\n",
        "tests": "assert shortest_path(4, [(0, 1, 4), (0, 2, 1), (2, 1, 2), (1, 3, 1)], 0) == [0, 3, 1, 4]\nassert shortest_path(3, [(0, 1, 5)], 0) == [0, 5, -1]\nassert shortest_path(1, [], 0) == [0]\nassert shortest_path(3, [(1, 0, 2), (0, 2, 0)], 1) == [2, 0, 2]\n",
    },
    {
        "id": "c36", "tier": 3, "entry_point": "evaluate_rpn",
        "prompt": "Write `evaluate_rpn(tokens: list[str]) -> int` evaluating an expression in reverse Polish notation with integers and the operators + - * / where / divides and truncates toward zero.",
        "solution": "def evaluate_rpn(tokens):\n    stack = []\n    for t in tokens:\n        if t in ('+', '-', '*', '/'):\n            b, a = stack.pop(), stack.pop()\n            if t == '+':\n                stack.append(a + b)\n            elif t == '-':\n                stack.append(a - b)\n            elif t == '*':\n                stack.append(a * b)\n            else:\n                q = abs(a) // abs(b)\n                stack.append(q if (a >= 0) == (b >= 0) else -q)\n        else:\n            stack.append(int(t))\n    return stack[0]\n",
        "tests": "assert evaluate_rpn(['2', '1', '+', '3', '*']) == 9\nassert evaluate_rpn(['4', '13', '5', '/', '+']) == 6\nassert evaluate_rpn(['7', '-2', '/']) == -3\nassert evaluate_rpn(['10', '6', '9', '3', '+', '-11', '*', '/', '*', '17', '+', '5', '+']) == 22\nassert evaluate_rpn(['42']) == 42\n",
    },
    {
        "id": "c37", "tier": 3, "entry_point": "evaluate_expression",
        "prompt": "Write `evaluate_expression(expr: str) -> int` evaluating an integer expression with + - * and parentheses (usual precedence, left-associative, spaces allowed, unary minus allowed before a number or a parenthesis). Do not use eval or exec.",
        "solution": "def evaluate_expression(expr):\n    s = expr.replace(' ', '')\n    pos = 0\n    def peek():\n        return s[pos] if pos < len(s) else ''\n    def expr_():\n        nonlocal pos\n        v = term()\n        while peek() in ('+', '-') and peek():\n            op = s[pos]; pos += 1\n            r = term()\n            v = v + r if op == '+' else v - r\n        return v\n    def term():\n        nonlocal pos\n        v = factor()\n        while peek() == '*':\n            pos += 1\n            v *= factor()\n        return v\n    def factor():\n        nonlocal pos\n        if peek() == '-':\n            pos += 1\n            return -factor()\n        if peek() == '(':\n            pos += 1\n            v = expr_()\n            pos += 1\n            return v\n        start = pos\n        while peek().isdigit():\n            pos += 1\n        return int(s[start:pos])\n    return expr_()\n",
        "tests": "assert evaluate_expression('1 + 2 * 3') == 7\nassert evaluate_expression('(1 + 2) * 3') == 9\nassert evaluate_expression('10 - 4 - 3') == 3\nassert evaluate_expression('-(2 + 3) * -2') == 10\nassert evaluate_expression('2*(3+(4-1))*2') == 24\n",
    },
    {
        "id": "c38", "tier": 3, "entry_point": "max_subarray",
        "prompt": "Write `max_subarray(nums: list[int]) -> int` returning the largest sum of a non-empty contiguous subarray (lists up to 10^5 elements; linear time expected).",
        "solution": "def max_subarray(nums):\n    best = cur = nums[0]\n    for x in nums[1:]:\n        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best\n",
        "tests": "assert max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6\nassert max_subarray([-3, -1, -2]) == -1\nassert max_subarray([5]) == 5\nassert max_subarray([1] * 100000) == 100000\n",
    },
    {
        "id": "c39", "tier": 3, "entry_point": "count_islands",
        "prompt": "Write `count_islands(grid: list[str]) -> int` counting groups of '#' cells connected horizontally or vertically in a grid of '#' and '.' characters (grids up to 300 x 300; avoid deep recursion).",
        "solution": "def count_islands(grid):\n    rows = len(grid)\n    cols = len(grid[0]) if rows else 0\n    seen = set()\n    count = 0\n    for r in range(rows):\n        for c in range(cols):\n            if grid[r][c] == '#' and (r, c) not in seen:\n                count += 1\n                stack = [(r, c)]\n                seen.add((r, c))\n                while stack:\n                    y, x = stack.pop()\n                    for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):\n                        ny, nx = y + dy, x + dx\n                        if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == '#' and (ny, nx) not in seen:\n                            seen.add((ny, nx))\n                            stack.append((ny, nx))\n    return count\n",
        "tests": "assert count_islands(['##..', '#..#', '...#']) == 2\nassert count_islands([]) == 0\nassert count_islands(['....']) == 0\nassert count_islands(['#.#', '.#.', '#.#']) == 5\nassert count_islands(['#' * 300] * 300) == 1\n",
    },
    {
        "id": "c40", "tier": 3, "entry_point": "lru_simulate",
        "prompt": "Write `lru_simulate(capacity: int, requests: list[int]) -> int` returning how many requests miss an LRU cache of `capacity` entries (a hit refreshes the key; a miss inserts it, evicting the least recently used key when full).",
        "solution": "from collections import OrderedDict\n\ndef lru_simulate(capacity, requests):\n    cache = OrderedDict()\n    misses = 0\n    for k in requests:\n        if k in cache:\n            cache.move_to_end(k)\n        else:\n            misses += 1\n            cache[k] = True\n            if len(cache) > capacity:\n                cache.popitem(last=False)\n    return misses\n",
        "tests": "assert lru_simulate(2, [1, 2, 1, 3, 2]) == 4\nassert lru_simulate(1, [1, 1, 1]) == 1\nassert lru_simulate(3, [1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5]) == 10\nassert lru_simulate(2, []) == 0\n",
    },
    {
        "id": "c41", "tier": 3, "entry_point": "interval_merge",
        "prompt": "Write `interval_merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]` merging overlapping or touching closed intervals [a, b] and returning them sorted by start as tuples.",
        "solution": "def interval_merge(intervals):\n    out = []\n    for a, b in sorted(intervals):\n        if out and a <= out[-1][1]:\n            out[-1] = (out[-1][0], max(out[-1][1], b))\n        else:\n            out.append((a, b))\n    return out\n",
        "tests": "assert interval_merge([(1, 3), (2, 6), (8, 10), (15, 18)]) == [(1, 6), (8, 10), (15, 18)]\nassert interval_merge([(1, 4), (4, 5)]) == [(1, 5)]\nassert interval_merge([]) == []\nassert interval_merge([(5, 7), (1, 2), (1, 10)]) == [(1, 10)]\n",
    },
    {
        "id": "c42", "tier": 3, "entry_point": "n_queens",
        "prompt": "Write `n_queens(n: int) -> int` returning the number of ways to place n non-attacking queens on an n x n board (n up to 9).",
        "solution": "def n_queens(n):\n    def place(row, cols, d1, d2):\n        if row == n:\n            return 1\n        total = 0\n        for c in range(n):\n            if c not in cols and row - c not in d1 and row + c not in d2:\n                total += place(row + 1, cols | {c}, d1 | {row - c}, d2 | {row + c})\n        return total\n    return place(0, frozenset(), frozenset(), frozenset())\n",
        "tests": "assert n_queens(1) == 1\nassert n_queens(4) == 2\nassert n_queens(6) == 4\nassert n_queens(8) == 92\nassert n_queens(3) == 0\n",
    },
]  # fmt: skip
