// Linked with one translation unit per public header (see CMakeLists.txt):
// building this test proves each header compiles on its own.
#define BOOST_TEST_MODULE headers_alone
#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_CASE(every_public_header_compiles_alone) { BOOST_TEST(true); }
