/* assert_near.h — cmocka checks that a double is within 1e-6 (relative, plus
 * 1e-6 absolute) of the expected value, or within a given relative
 * tolerance (assert_rel), printing both on failure. Include
 * after <cmocka.h> and <math.h>. */
#ifndef FAIRGATE_TEST_ASSERT_NEAR_H
#define FAIRGATE_TEST_ASSERT_NEAR_H

#define assert_near(got, want)                                                         \
	do {                                                                           \
		double g_ = (got), w_ = (want);                                        \
		if (fabs(g_ - w_) > 1e-6 * (fabs(w_) + 1)) {                           \
			print_error("%s = %.9g, want %.9g\n", #got, g_, w_);           \
			fail();                                                        \
		}                                                                      \
	} while (0)

/* within `tol` relative (0.005 = 0.5%) */
#define assert_rel(got, want, tol)                                                        \
	do {                                                                              \
		double g_ = (got), w_ = (want);                                           \
		if (!(fabs(g_ - w_) <= fabs(w_) * (tol))) {                               \
			print_error("%s = %.6g, want %.6g (±%.2g%%)\n", #got, g_, w_,       \
				    (double)(tol) * 100);                                  \
			fail();                                                           \
		}                                                                         \
	} while (0)

#endif
