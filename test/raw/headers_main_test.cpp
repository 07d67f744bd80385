// Compiles each public header of the raw socket alone (see headers_*_only.cpp).
#define BOOST_TEST_MODULE raw_headers
#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_CASE(raw_headers_compile_alone) {
  BOOST_TEST(true);
}
