"""Word lists the offline brain thinks with (read-only data)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# Importance of an observation by the words it contains (the highest match wins).
IMPORTANCE: Mapping[str, int] = MappingProxyType(
    {
        # mundane
        "sleep": 1, "sleeping": 1, "asleep": 1, "brush": 1, "brushing": 1, "teeth": 1,
        "bed": 1, "idle": 1, "shower": 1, "wash": 1, "washing": 1, "dishes": 1,
        "eat": 2, "eating": 2, "breakfast": 2, "lunch": 2, "dinner": 2, "coffee": 2,
        "walk": 2, "walking": 2, "sitting": 2, "cleaning": 2, "tidy": 2,
        "read": 3, "reading": 3, "work": 3, "working": 3, "chat": 3, "chatting": 3,
        "talking": 3, "shop": 3, "shopping": 3, "paint": 3, "painting": 3, "study": 3,
        "meet": 4, "meeting": 4, "visitor": 4, "says": 4, "said": 4, "asks": 4,
        "stranger": 4, "new": 4,
        # noteworthy
        "news": 6, "help": 6, "plan": 5, "planning": 5, "invite": 6, "invited": 6,
        "invitation": 6, "birthday": 6, "promotion": 7, "argue": 7, "argued": 7,
        "argument": 7, "fight": 7, "angry": 6, "party": 7, "valentine": 7, "mayor": 7,
        "candidate": 7, "running": 5, "campaign": 7, "election": 8, "love": 8, "crush": 8,
        "date": 6, "kiss": 8, "secret": 7, "accident": 8, "injured": 8, "hospital": 8,
        "smoke": 8, "fire": 9, "burning": 9, "emergency": 9, "wedding": 9, "pregnant": 9,
        "breakup": 9, "divorce": 9, "fired": 8, "accepted": 8, "died": 10, "death": 10,
        "funeral": 10,
    }
)

# Emoji for an action by the words it contains, in order of appearance.
EMOJI: Mapping[str, str] = MappingProxyType(
    {
        "sleep": "😴", "sleeping": "😴", "bed": "🛏️", "wake": "⏰", "waking": "⏰",
        "coffee": "☕", "espresso": "☕", "tea": "🍵", "breakfast": "🍳", "cook": "🍳",
        "cooking": "🍳", "lunch": "🥪", "dinner": "🍝", "eat": "🍽️", "eating": "🍽️",
        "having": "🍽️", "bake": "🧁", "baking": "🧁", "pastries": "🧁", "serve": "🍽️",
        "serving": "🍽️", "read": "📖", "reading": "📖", "book": "📚", "study": "📚",
        "studying": "📚", "research": "🔬", "write": "✍️", "writing": "✍️", "journal": "📓",
        "notes": "📝", "work": "💼", "working": "💼", "computer": "💻", "email": "📧",
        "walk": "🚶", "walking": "🚶", "run": "🏃", "jog": "🏃", "jogging": "🏃",
        "exercise": "🏋️", "talk": "💬", "talking": "💬", "chat": "💬", "chatting": "💬",
        "answering": "💬", "call": "📞", "phone": "📞", "party": "🎉", "celebrate": "🎉",
        "paint": "🎨", "painting": "🎨", "music": "🎵", "piano": "🎹", "guitar": "🎸",
        "sing": "🎤", "shower": "🚿", "brush": "🪥", "brushing": "🪥", "wash": "🧼",
        "washing": "🧼", "clean": "🧹", "cleaning": "🧹", "tidy": "🧹", "shop": "🛒",
        "shopping": "🛒", "buy": "🛒", "garden": "🌱", "gardening": "🌱", "plant": "🌱",
        "fire": "🔥", "burning": "🔥", "stove": "🔥", "open": "🔑", "opening": "🔑",
        "close": "🔒", "closing": "🔒", "relax": "🛋️", "relaxing": "🛋️", "tv": "📺",
        "drink": "🍺", "beer": "🍺", "bar": "🍺", "pub": "🍺", "medicine": "💊",
        "pharmacy": "💊", "teach": "🧑‍🏫", "teaching": "🧑‍🏫", "class": "🏫", "plan": "🗓️",
        "planning": "🗓️", "election": "🗳️", "vote": "🗳️", "campaign": "📣", "help": "🤝",
        "helping": "🤝", "think": "💭", "thinking": "💭", "fix": "🔧", "fixing": "🔧",
    }
)

# Words that point an activity to kinds of places.
PLACE_HINTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "sleep": ("bed", "bedroom"), "sleeping": ("bed", "bedroom"), "nap": ("bed", "sofa"),
        "waking": ("bed", "bedroom", "bathroom"), "wake": ("bed", "bedroom", "bathroom"),
        "shower": ("bathroom", "shower"), "brush": ("bathroom", "sink"),
        "breakfast": ("kitchen", "table", "cafe"), "lunch": ("kitchen", "cafe", "table"),
        "dinner": ("kitchen", "table", "restaurant"), "cook": ("kitchen", "stove"),
        "cooking": ("kitchen", "stove"), "eat": ("kitchen", "table", "cafe"),
        "eating": ("kitchen", "table", "cafe"), "having": ("kitchen", "table"),
        "coffee": ("cafe", "counter", "kitchen", "coffee"), "work": ("desk", "office", "counter"),
        "working": ("desk", "office", "counter"), "read": ("desk", "sofa", "library", "shelf"),
        "reading": ("desk", "sofa", "library", "shelf"), "study": ("desk", "library", "college"),
        "studying": ("desk", "library", "college"), "research": ("desk", "library", "college"),
        "write": ("desk",), "writing": ("desk",), "journal": ("desk",),
        "walk": ("park", "garden"), "walking": ("park", "garden"), "jog": ("park",),
        "jogging": ("park",), "exercise": ("park", "gym"), "relax": ("sofa", "living", "park"),
        "relaxing": ("sofa", "living", "park"), "drink": ("bar", "pub"), "beer": ("bar", "pub"),
        "shop": ("store", "market", "shop"), "shopping": ("store", "market", "shop"),
        "buy": ("store", "market", "shop"), "groceries": ("market", "store"),
        "medicine": ("pharmacy",), "teach": ("college", "classroom"),
        "teaching": ("college", "classroom"), "class": ("college", "classroom"),
        "party": ("cafe", "bar", "living"), "paint": ("easel", "studio"),
        "painting": ("easel", "studio"), "music": ("piano", "studio"), "serve": ("counter",),
        "serving": ("counter",), "open": ("counter",), "opening": ("counter",),
    }
)

# Words of activities done at home.
HOME_ACTIVITY = frozenset(
    {"sleep", "sleeping", "nap", "wake", "waking", "shower", "brush", "breakfast", "dinner",
     "bed", "home", "relax", "relaxing", "getting"}
)
PLACE_WORDS = frozenset(
    {"cafe", "park", "market", "college", "pharmacy", "house", "home", "bar", "pub", "store",
     "supply", "street", "dorm", "library", "school", "shop", "apartment", "office", "square",
     "garden", "church", "hall", "town", "crown", "restaurant"}
)
HOME_WORDS = frozenset({"house", "home", "apartment", "dorm", "room", "flat", "cottage"})

# How an action changes an object's state: (words in the action, the new state).
STATE_CHANGES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("turn off", "turns off", "turning off", "switch off", "switching off", "put out",
      "putting out", "extinguish"), "off"),
    (("turn on", "turns on", "turning on", "switch on", "switching on", "light"), "on"),
    (("clean", "wash", "wipe", "tidy", "scrub"), "clean"),
    (("fix", "repair", "mend"), "working"),
    (("open",), "open"),
    (("close", "shut", "lock"), "closed"),
    (("brew", "make coffee", "making coffee"), "brewing coffee"),
    (("cook", "fry", "boil", "bake"), "cooking"),
    (("break", "drop", "smash"), "broken"),
    (("fill", "refill", "stock"), "full"),
    (("empty", "drain"), "empty"),
    (("sleep", "lie down", "nap"), "occupied"),
    (("use", "using", "sit", "play", "read", "write", "work"), "in use"),
)

# Words that make an observation salient enough to react to.
ALARM_WORDS = frozenset(
    {"fire", "burning", "smoke", "help", "emergency", "hurt", "injured", "accident", "flood",
     "flooding", "broken", "leaking"}
)
GREETINGS = frozenset({"hi", "hello", "hey", "morning", "evening", "afternoon", "greetings"})
AI_WORDS = frozenset({"ai", "bot", "robot", "artificial", "machine", "program", "computer",
                      "human", "real", "person", "chatbot", "simulated"})

STOPWORDS = frozenset(
    {
        "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
        "are", "as", "at", "be", "because", "been", "before", "being", "below", "between",
        "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during",
        "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
        "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into",
        "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor",
        "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
        "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such",
        "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there",
        "these", "they", "this", "those", "through", "to", "too", "under", "until", "up",
        "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom",
        "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
        "also", "today", "tomorrow", "yesterday", "said", "says", "going", "get", "gets", "got",
        "like", "really", "much", "many", "well", "still", "one", "two"
    }
)
