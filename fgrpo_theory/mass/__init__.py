"""Mass redistribution inside the correct set of a softmax policy (theory.md sections 5 and 6).

A policy is a vector of logits ``z`` over K actions with ``p = softmax(z)`` and a mask of the
correct actions C (see :mod:`fgrpo_theory.policy`). A group of N i.i.d. draws is given sparsely
(distinct sampled actions and their counts, never a K x N array). Rewards default to the
categorical simulation's R_c = +1, R_w = -1; pass ``r_correct=1, r_incorrect=0`` for the LLM
encoding. The step size is ``lr`` (eta in the paper).

Groups (:mod:`.groups`)
    Group, make_group, sample_group
Section-5 statistics and their first-order closed forms (:mod:`.statistics`)
    GroupStatistics, group_statistics, P17Terms, P10Terms,
    total_correct_change_p17 (P-17), unsampled_correct_change_p10 (P-10, Proposition 3.2)
Softmax changes after any logit step (:mod:`.softmax`)
    prob_change_first_order (P-18), subset_change_first_order (P-19),
    exact_prob_change, exact_subset_change, PROB_SUM_TOL
One update of one group (:mod:`.step`)
    StepSpec (rule "theory" (P-5), "linear", "logprob"; lr, gamma, rewards, advantage),
    logit_step, one_step, OneStepResult, RULES, QUANTITIES, REFERENCES
Closed-form expectations over the group draw (:mod:`.closed_forms`)
    expected_unsampled_square_mass (E[U2]), expected_sampled_mass_given_correct (Lemma H.1,
    P-24/P-25), expected_baseline_given_correct (Cor. H.2), LogprobDrift,
    expected_logprob_drift (theory.md section 6)
Expectations by enumeration or Monte Carlo (:mod:`.expectation`)
    expected_change, ExpectationResult, count_outcomes, log_count_outcomes, resolve_method,
    MAX_ENUMERATION, MAX_MONTE_CARLO_DRAWS, MAX_OUTCOME_DIGITS
The report of the ``mass`` command (:mod:`.report`)
    mass_report, REPORT_QUANTITIES
Bounds
    MAX_GROUP_SIZE (largest N, 2**20)
"""

from __future__ import annotations

from . import closed_forms, expectation, groups, report, softmax, statistics, step
from ._checks import MAX_GROUP_SIZE
from .closed_forms import *  # noqa: F403
from .expectation import *  # noqa: F403
from .groups import *  # noqa: F403
from .report import *  # noqa: F403
from .softmax import *  # noqa: F403
from .statistics import *  # noqa: F403
from .step import *  # noqa: F403

# Every module's public names, each written once (in its module's ``__all__``).
__all__ = ["MAX_GROUP_SIZE"]
__all__ += groups.__all__
__all__ += statistics.__all__
__all__ += softmax.__all__
__all__ += step.__all__
__all__ += closed_forms.__all__
__all__ += expectation.__all__
__all__ += report.__all__
