// One test program for the connection's parts without a device (lib/rc's sans-I/O
// objects): each file is a suite of its own, named after the part it tests.
#define BOOST_TEST_MODULE connection_parts
#include <boost/test/unit_test.hpp>
