//! The generated `topology()` of every fixture contract equals the topology the generator's
//! model built from the same contract: what the runtime declares is what the generator
//! checked, with nothing lost or changed on the way through generated code.

#[test]
fn generated_topologies_equal_the_generators_model() {
    assert!(warren_compile_fixtures::TOPOLOGIES.len() > 5);
    for (contract, topology) in warren_compile_fixtures::TOPOLOGIES {
        let checked = match warren_codegen::check_contract(contract) {
            Ok(checked) => checked,
            Err(error) => panic!("{contract} should be valid:\n{error}"),
        };
        assert_eq!(topology(), checked.contract.topology, "{contract}");
    }
}
