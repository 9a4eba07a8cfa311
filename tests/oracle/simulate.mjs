// Reads {"policies": {<name>: [<policy document>...]}, "questions": [...]} on
// stdin and writes one iam-simulate verdict per question, in order, on stdout.
// A question: {"policies": <name>, "principal", "action", "resource", "context"}.
// A verdict: {"result": "Allowed" | "ExplicitlyDenied" | "ImplicitlyDenied"}
// or {"error": <why iam-simulate refused to run it>}, plus the context keys it
// ignored as not applicable to the action (which must then be absent in AWS too).
import { runSimulation } from '@cloud-copilot/iam-simulate'

const ACCOUNT_ID = '123456789012'

async function readStdin() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

async function verdict(question, policies) {
  const simulation = {
    request: {
      principal: question.principal,
      action: question.action,
      resource: { resource: question.resource, accountId: ACCOUNT_ID },
      contextVariables: question.context
    },
    identityPolicies: policies[question.policies].map((policy, index) => ({
      name: `${question.policies}-${index}`,
      policy
    })),
    serviceControlPolicies: [],
    resourceControlPolicies: []
  }
  const response = await runSimulation(simulation, { simulationMode: 'Strict' })
  if (response.resultType === 'error') return { error: JSON.stringify(response.errors) }
  if (response.resultType !== 'single') return { error: `unexpected ${response.resultType} result` }
  return { result: response.overallResult, ignored: response.result.ignoredContextKeys ?? [] }
}

const input = await readStdin()
const verdicts = []
for (const question of input.questions) verdicts.push(await verdict(question, input.policies))
process.stdout.write(JSON.stringify(verdicts))
