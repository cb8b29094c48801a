"""The stories and arithmetic of the synthetic problems: shapes, templates and the scene words.

A problem is a shape (:data:`SHAPES`: draws the numbers, computes the answer) told through a template
(:data:`TEMPLATES`: question and worked steps, filled from a :func:`_scene` of names and objects), drawn by
:mod:`grpo_lite.data.synthetic`. Standard library only.

>>> import random
>>> values = SHAPES["add"][1](random.Random(0))
>>> values["ans"] == values["a"] + values["b"]
True
>>> sorted({t.level for t in TEMPLATES}) == list(LEVELS)
True
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Level = Literal[1, 2, 3]
LEVELS: tuple[Level, ...] = (1, 2, 3)
Values = dict[str, int]

# fmt: off
_PEOPLE = (
    ("Maya", "f"), ("Omar", "m"), ("Lena", "f"), ("Tariq", "m"), ("Priya", "f"), ("Jonas", "m"),
    ("Aiko", "f"), ("Mateo", "m"), ("Nadia", "f"), ("Felix", "m"), ("Zara", "f"), ("Kwame", "m"),
    ("Ingrid", "f"), ("Ravi", "m"), ("Sofia", "f"), ("Hugo", "m"), ("Amara", "f"), ("Liam", "m"),
    ("Mei", "f"), ("Diego", "m"), ("Elif", "f"), ("Tomas", "m"), ("Chloe", "f"), ("Yusuf", "m"),
)
# fmt: on
_WORDS: dict[str, tuple[str, ...]] = {
    "obj": ("marbles", "stickers", "stamps", "seashells", "trading cards", "buttons", "beads", "postcards"),
    "items": ("notebooks", "pens", "juice boxes", "toy cars", "hair clips", "erasers", "candles", "mugs"),
    "thing": ("kite", "board game", "backpack", "water bottle", "puzzle", "lamp", "scarf", "football"),
    "animal": ("ducks", "geese", "swans", "frogs", "turtles"),
    "veg": ("tomato", "pepper", "cabbage", "bean", "pumpkin", "lettuce"),
    "plant": ("sunflower", "bean plant", "tomato plant", "young tree"),
    "day": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "job": ("walking dogs", "washing cars", "tutoring", "mowing lawns", "babysitting", "raking leaves"),
}
_BILLS = (10, 20, 50, 100)


def _scene(r: random.Random) -> dict[str, str]:
    """Names, pronouns and objects for one story (a template uses the fields it needs)."""
    (name, gender), (friend, _) = r.sample(_PEOPLE, 2)
    he, him, his = ("she", "her", "her") if gender == "f" else ("he", "him", "his")
    scene = {"P": name, "F": friend, "he": he, "He": he.capitalize(), "him": him, "his": his, "His": his.capitalize()}
    for key, words in _WORDS.items():
        scene[key], scene[key + "2"] = r.sample(words, 2)
    return scene


# ----------------------------------------------------------------------------- shapes (the arithmetic)
def _bill_above(cost: int) -> int:
    """The smallest bill that pays ``cost`` with at least 2 dollars of change (plural nouns read right)."""
    return min(b for b in _BILLS if b >= cost + 2)


# The one registry of shapes: name -> (level, draw). A draw returns every number a story may show,
# intermediate results included, and the answer "ans" (computed; an integer of at least 2, so the
# stories' plural nouns read right). ":=" lets later numbers depend on earlier ones. Level = steps.
# fmt: off
SHAPES: dict[str, tuple[Level, Callable[[random.Random], Values]]] = {
    "add": (1, lambda r: {"a": (a := r.randint(2, 40)), "b": (b := r.randint(2, 30)), "ans": a + b}),
    "sub": (1, lambda r: {"a": (a := r.randint(8, 60)), "b": (b := r.randint(1, a - 2)), "ans": a - b}),
    "mul_sub": (2, lambda r: {
        "k": (k := r.randint(2, 8)), "m": (m := r.randint(3, 12)), "prod": k * m,
        "g": (g := r.randint(1, k * m - 2)), "ans": k * m - g}),
    "mul_add": (2, lambda r: {
        "k": (k := r.randint(2, 8)), "m": (m := r.randint(3, 12)), "prod": k * m,
        "x": (x := r.randint(2, 20)), "ans": k * m + x}),
    "add_sub": (2, lambda r: {
        "a": (a := r.randint(5, 60)), "b": (b := r.randint(2, 40)), "total": a + b,
        "c": (c := r.randint(1, a + b - 2)), "ans": a + b - c}),
    "change": (2, lambda r: {
        "k": (k := r.randint(2, 6)), "m": (m := r.randint(2, 15)), "cost": k * m,
        "bill": (bill := _bill_above(k * m)), "ans": bill - k * m}),
    "div_sub": (2, lambda r: {
        "k": (k := r.randint(2, 8)), "g": (g := r.randint(1, 4)), "each": (each := r.randint(g + 2, 12)),
        "n": k * each, "ans": each - g}),
    "two_costs_change": (3, lambda r: {
        "k1": (k1 := r.randint(2, 5)), "p1": (p1 := r.randint(2, 9)), "c1": (c1 := k1 * p1),
        "k2": (k2 := r.randint(2, 5)), "p2": (p2 := r.randint(2, 9)), "c2": (c2 := k2 * p2),
        "bill": (bill := _bill_above(c1 + c2)), "ans": bill - c1 - c2}),
    "mul_sub_div": (3, lambda r: {
        "t": (t := r.randint(3, 5)), "c": (c := r.randint(6, 12)), "prod": t * c, "b": (b := r.randint(2, 6)),
        "e": (e := (t * c) % b or b), "rest": t * c - e, "ans": (t * c - e) // b}),  # e leaves a multiple of b
    "mul_mul_sub": (3, lambda r: {
        "x": (x := r.randint(2, 9)), "y": (y := r.randint(3, 12)), "z": (z := r.randint(2, 7)),
        "xy": x * y, "total": x * y * z, "s": (s := r.randint(1, x * y * z - 2)), "ans": x * y * z - s}),
    "half_mul_sub": (3, lambda r: {
        "a": (a := 2 * r.randint(3, 10)), "half": a // 2, "w": (w := r.randint(3, 10)), "saved": a // 2 * w,
        "p": (p := r.randint(5, a // 2 * w - 2)), "ans": a // 2 * w - p}),
    "mul_div_sub": (3, lambda r: {
        "k": (k := r.randint(2, 6)), "j": (j := r.randint(1, 4)), "per": (per := r.choice((10, 12, 20, 24))),
        "boxes": k * j, "total": k * j * per, "each": j * per, "g": (g := r.randint(1, 5)), "ans": j * per - g}),
    "sub_mul_change": (3, lambda r: {
        "price": (price := r.randint(6, 20)), "d": (d := r.randint(1, price - 2)), "sale": price - d,
        "k": (k := r.randint(2, 4)), "cost": (cost := k * (price - d)),
        "bill": (bill := _bill_above(cost)), "ans": bill - cost}),
    "mul_div_mul": (3, lambda r: {
        "s": (s := r.choice((4, 5, 6, 8))), "j": (j := r.randint(2, 6)), "a": s * j, "t": (t := r.randint(2, 4)),
        "prod": s * j * t, "groups": j * t, "p": (p := r.randint(2, 7)), "ans": j * t * p}),
    "double_sub_sum": (3, lambda r: {
        "a": (a := r.randint(4, 20)), "dbl": 2 * a, "d": (d := r.randint(1, 2 * a - 1)), "less": 2 * a - d,
        "ans": 5 * a - d}),
    "add_double_mul": (3, lambda r: {
        "l": (ln := r.randint(5, 30)), "w": (w := r.randint(3, 20)), "half": ln + w, "per": 2 * (ln + w),
        "p": (p := r.randint(2, 9)), "ans": 2 * (ln + w) * p}),
    "days_left": (3, lambda r: {
        "per": (per := r.randint(5, 25)), "days": (days := r.randint(4, 15)), "done": (done := r.randint(1, days - 2)),
        "pages": per * days, "read": per * done, "left": per * (days - done), "ans": days - done}),
}
# fmt: on


# ----------------------------------------------------------------------------- templates (the stories)
@dataclass(frozen=True)
class Template:
    """A story for a shape (a key of :data:`SHAPES`): its question and worked steps (one sentence a step) are
    ``str.format`` texts of the shape's numbers and the scene's words."""

    name: str
    shape: str
    question: str
    steps: tuple[str, ...]

    @property
    def level(self) -> Level:
        """The level of the template's shape."""
        return SHAPES[self.shape][0]


_T = Template
# The one registry of templates, in order. Every {field} must exist in the shape's values or _scene.
# fmt: off
TEMPLATES: tuple[Template, ...] = (
    _T("finds_more", "add", "{P} has {a} {obj}. {He} finds {b} more {obj}. How many {obj} does {P} have now?",
       ("{P} has {a} + {b} = {ans} {obj} now.",)),
    _T("animals_arrive", "add", "There are {a} {animal} on a pond. Then {b} more {animal} arrive. How many {animal} are on the pond now?",
       ("There are {a} + {b} = {ans} {animal} on the pond.",)),
    _T("reading_pages", "add", "{P} read {a} pages on {day} and {b} pages on {day2}. How many pages did {he} read on the two days?",
       ("{P} read {a} + {b} = {ans} pages.",)),
    _T("age_older", "add", "{P} is {a} years old. {F} is {b} years older than {P}. How old is {F}?",
       ("{F} is {a} + {b} = {ans} years old.",)),
    _T("game_points", "add", "{P} scored {a} points in the first game and {b} points in the second game. How many points did {he} score in all?",
       ("{P} scored {a} + {b} = {ans} points.",)),
    _T("plant_growth", "add", "A {plant} was {a} centimeters tall. Over the summer it grew {b} more centimeters. How tall is it now, in centimeters?",
       ("The {plant} is {a} + {b} = {ans} centimeters tall.",)),
    _T("gives_away", "sub", "{P} had {a} {obj} and gave {b} of them to {F}. How many {obj} does {P} have left?",
       ("{P} has {a} - {b} = {ans} {obj} left.",)),
    _T("shelf_books", "sub", "A shelf holds {a} books. {P} takes {b} books off the shelf to read. How many books are still on the shelf?",
       ("{a} - {b} = {ans} books are still on the shelf.",)),
    _T("bus_stop", "sub", "A bus has {a} passengers. At the next stop {b} passengers get off and nobody gets on. How many passengers are on the bus now?",
       ("{a} - {b} = {ans} passengers are on the bus.",)),
    _T("cookies_eaten", "sub", "A jar had {a} cookies before a party. After the party there were {b} cookies left. How many cookies were eaten?",
       ("{a} - {b} = {ans} cookies were eaten.",)),
    _T("album_needed", "sub", "{P}'s album has room for {a} stickers. {He} has {b} stickers. How many more stickers does {he} need to fill the album?",
       ("{He} needs {a} - {b} = {ans} more stickers.",)),
    _T("money_spent", "sub", "{P} had {a} dollars. {He} spent {b} dollars on a {thing}. How many dollars does {he} have left?",
       ("{He} has {a} - {b} = {ans} dollars left.",)),
    _T("change_from_bill", "change", "{P} buys {k} {items} that cost {m} dollars each. {He} pays with a {bill}-dollar bill. How much change, in dollars, does {he} get?",
       ("The {items} cost {k} x {m} = {cost} dollars.", "The change is {bill} - {cost} = {ans} dollars.")),
    _T("fair_rides", "change", "At the fair, {P} buys {k} ride tickets at {m} dollars each and pays with a {bill}-dollar bill. How many dollars does {he} get back?",
       ("The tickets cost {k} x {m} = {cost} dollars.", "{He} gets back {bill} - {cost} = {ans} dollars.")),
    _T("packs_give", "mul_sub", "{P} buys {k} packs of {obj} with {m} {obj} in each pack. {He} gives {g} {obj} to {F}. How many {obj} does {P} have now?",
       ("{P} buys {k} x {m} = {prod} {obj}.", "{He} has {prod} - {g} = {ans} {obj} now.")),
    _T("classroom_desks", "mul_sub", "A classroom has {k} rows of desks with {m} desks in each row. {g} desks are empty. How many students are sitting at desks?",
       ("There are {k} x {m} = {prod} desks.", "{prod} - {g} = {ans} students are sitting.")),
    _T("pizza_slices", "mul_sub", "{P} orders {k} pizzas cut into {m} slices each. {His} family eats {g} slices. How many slices are left?",
       ("There are {k} x {m} = {prod} slices.", "{prod} - {g} = {ans} slices are left.")),
    _T("wage_spend", "mul_sub", "{P} earns {m} dollars an hour {job}. {He} works {k} hours and then spends {g} dollars. How many dollars of {his} pay are left?",
       ("{P} earns {m} x {k} = {prod} dollars.", "{prod} - {g} = {ans} dollars are left.")),
    _T("tickets_snack", "mul_add", "A museum ticket costs {m} dollars and a guidebook costs {x} dollars. {P} buys {k} tickets and one guidebook. How many dollars does {he} spend?",
       ("The tickets cost {k} x {m} = {prod} dollars.", "With the guidebook, {prod} + {x} = {ans} dollars.")),
    _T("weekly_savings", "mul_add", "{P} has {x} dollars saved. {He} saves {m} more dollars every week for {k} weeks. How many dollars does {he} have then?",
       ("{He} saves {m} x {k} = {prod} more dollars.", "{He} has {x} + {prod} = {ans} dollars.")),
    _T("garden_rows", "mul_add", "{P} planted {k} rows of {veg} plants with {m} plants in each row, then {x} more along the fence. How many {veg} plants did {he} plant in all?",
       ("The rows hold {k} x {m} = {prod} plants.", "In all, {prod} + {x} = {ans} plants.")),
    _T("bike_ride", "mul_add", "{P} rides a bike for {k} hours at {m} kilometers each hour, then walks {x} kilometers home. How many kilometers does {he} travel in all?",
       ("{He} rides {k} x {m} = {prod} kilometers.", "In all, {prod} + {x} = {ans} kilometers.")),
    _T("bought_gave", "add_sub", "{P} had {a} {obj}. {He} bought {b} more and then gave {c} to {F}. How many {obj} does {P} have now?",
       ("After buying, {P} has {a} + {b} = {total} {obj}.", "After giving some away, {he} has {total} - {c} = {ans} {obj}.")),
    _T("bakery_day", "add_sub", "A bakery baked {a} loaves of bread in the morning and {b} loaves in the afternoon. It sold {c} loaves. How many loaves were not sold?",
       ("The bakery baked {a} + {b} = {total} loaves.", "{total} - {c} = {ans} loaves were not sold.")),
    _T("share_then_give", "div_sub", "{n} crayons are shared equally among {k} children. Each child then gives {g} crayons back to the teacher. How many crayons does each child keep?",
       ("Each child gets {n} / {k} = {each} crayons.", "Each child keeps {each} - {g} = {ans} crayons.")),
    _T("two_items_change", "two_costs_change", "{P} buys {k1} {items} at {p1} dollars each and {k2} {items2} at {p2} dollars each. {He} pays with a {bill}-dollar bill. How much change, in dollars, does {he} get?",
       ("The {items} cost {k1} x {p1} = {c1} dollars.", "The {items2} cost {k2} x {p2} = {c2} dollars.", "The change is {bill} - {c1} - {c2} = {ans} dollars.")),
    _T("cookies_bags", "mul_sub_div", "{P} bakes {t} trays of cookies with {c} cookies on each tray. {He} eats {e} cookies and packs the rest equally into {b} bags. How many cookies go in each bag?",
       ("{He} bakes {t} x {c} = {prod} cookies.", "After eating {e}, {prod} - {e} = {rest} cookies are left.", "Each bag gets {rest} / {b} = {ans} cookies.")),
    _T("milk_sold", "mul_mul_sub", "A farmer has {x} cows. Each cow gives {y} liters of milk a day. After {z} days the farmer has sold {s} liters. How many liters of milk are left?",
       ("The cows give {x} x {y} = {xy} liters a day.", "In {z} days that is {xy} x {z} = {total} liters.", "{total} - {s} = {ans} liters are left.")),
    _T("hall_chairs", "mul_mul_sub", "A school has {x} halls. Each hall has {y} rows with {z} chairs in each row. {s} chairs are broken. How many chairs can be used?",
       ("The halls have {x} x {y} = {xy} rows.", "The rows hold {xy} x {z} = {total} chairs.", "{total} - {s} = {ans} chairs can be used.")),
    _T("allowance_half", "half_mul_sub", "{P} gets {a} dollars of allowance each week and saves half of it. After {w} weeks {he} buys a {thing} for {p} dollars with the savings. How many dollars of savings are left?",
       ("{He} saves {a} / 2 = {half} dollars a week.", "In {w} weeks {he} saves {half} x {w} = {saved} dollars.", "After buying the {thing}, {saved} - {p} = {ans} dollars are left.")),
    _T("school_pencils", "mul_div_sub", "A school orders {boxes} boxes of pencils with {per} pencils in each box. The pencils are shared equally among {k} classes, and each class gives {g} pencils to the office. How many pencils does each class keep?",
       ("The school gets {boxes} x {per} = {total} pencils.", "Each class gets {total} / {k} = {each} pencils.", "Each class keeps {each} - {g} = {ans} pencils.")),
    _T("discount_each", "sub_mul_change", "A {thing} costs {price} dollars, but on sale each one is {d} dollars cheaper. {P} buys {k} of them on sale and pays with a {bill}-dollar bill. How much change, in dollars, does {he} get?",
       ("On sale one {thing} costs {price} - {d} = {sale} dollars.", "{k} of them cost {k} x {sale} = {cost} dollars.", "The change is {bill} - {cost} = {ans} dollars.")),
    _T("apples_bags_sell", "mul_div_mul", "{P} picks {a} apples from each of {t} trees. {He} puts the apples into bags of {s} and sells each bag for {p} dollars. How many dollars does {he} make?",
       ("{He} picks {a} x {t} = {prod} apples.", "That fills {prod} / {s} = {groups} bags.", "{He} makes {groups} x {p} = {ans} dollars.")),
    _T("party_cups", "mul_div_mul", "{P} invites {a} guests. Each guest needs {t} cups, and cups come in packs of {s}. A pack costs {p} dollars. How many dollars does {he} spend on cups?",
       ("{He} needs {a} x {t} = {prod} cups.", "That is {prod} / {s} = {groups} packs.", "The packs cost {groups} x {p} = {ans} dollars.")),
    _T("ages_sum", "double_sub_sum", "{P} is {a} years old. {His} sister is twice as old as {him}, and {his} brother is {d} years younger than the sister. What is the sum of their three ages?",
       ("The sister is 2 x {a} = {dbl} years old.", "The brother is {dbl} - {d} = {less} years old.", "The sum is {a} + {dbl} + {less} = {ans}.")),
    _T("fence_cost", "add_double_mul", "A rectangular garden is {l} meters long and {w} meters wide. Fencing costs {p} dollars per meter. How many dollars does a fence all the way around cost?",
       ("One length and one width make {l} + {w} = {half} meters.", "The way around is 2 x {half} = {per} meters.", "The fence costs {per} x {p} = {ans} dollars.")),
    _T("book_days", "days_left", "A book has {pages} pages. {P} reads {per} pages every day. After {done} days, how many more days does {he} need to finish the book?",
       ("In {done} days {he} reads {per} x {done} = {read} pages.", "{pages} - {read} = {left} pages are left.", "That takes {left} / {per} = {ans} more days.")),
)
# fmt: on
