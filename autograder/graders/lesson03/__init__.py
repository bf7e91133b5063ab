"""Hidden graders of lesson 03 (causal multi-head self-attention).

In the learner release these checks run in practice, answered from recording.json/.npz (the
reference's values for the practice inputs; engine/recording.py). What the recording answers
(bench/bench_practice_agreement.py measures it over every buggy variant of the catalog):

- every check but those below, for any submission: their reference calls are on the checks'
  own inputs, the diagnosis candidates included (made all at once while recording);
- heads-merge only when the learner's attention weights are right: it rebuilds the output from
  those weights with the reference's merge, a call on the learner's own values; otherwise it is
  judged only officially (its TODO comes after those whose checks then fail);
- heads-split's second part (the output made of each head's own values, rebuilt from the
  learner's weights the same way) likewise; where it cannot be answered, the weights' part
  judges alone;
- never: quiz-1..3 (test_quiz.py holds the key and does not ship).

Official-only parts (test_official_*.py, never shipped): np-edges on lengths drawn over a wide
range, short-sequences on module shapes and lengths drawn afresh. The goal set from this
inventory: the same next step and the same diagnosis as the official grade for every buggy
variant whose files keep the stubs' TODO comments.
"""
