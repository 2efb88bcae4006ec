"""Sample sentences shared by the tests that encode a handful of real sentences with all-MiniLM-L6-v2."""

SENTENCES = [
    "A man is playing a guitar.", "A woman is slicing an onion.", "Two dogs run across a snowy field.",
    "The stock market fell sharply on Monday after the report.", "A child is riding a horse.",
    "Kids are playing soccer in the park.", "The cat sleeps.", "Nobody knows where the old lighthouse keeper went.",
    "A plane is taking off.", "Someone is frying meat in a pan.", "The president met with foreign leaders in Paris.",
    "Is it safe to drink tap water here?", "A man is cutting a tomato.", "Rain is expected later tonight.",
    "Three women are dancing on a stage.", "The quick brown fox jumps over the lazy dog.",
]
